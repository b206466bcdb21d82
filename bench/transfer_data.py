"""Data for issue 20's transfer replays (bench/bench_transfer.py): runs that differ in size and
scale, each carrying the covariates a model could use (accelerators, active parameters,
tokens, sequence length, global batch in tokens). Pure: no database, no MLflow; the only file
read is the MLPerf extraction in bench/data/mlperf/ (and the shipped published runs).

1. `growing_organisation(seed)`: a generated organisation whose later runs are bigger than
   its history, with known truth in a form the log-linear factor model does not share.
2. `mlperf_jobs()`: MLPerf Training v3.1/v4.0/v4.1 LLM submissions, one job each.
3. `published_jobs()`: service/data/published_runs.csv through bench_calibration_eval's
   helpers, with the covariates the table has.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.bench_calibration_eval import published_jobs as _published_pairs
from bench.calibration_replay import Job
from service.calibration.priors import PublishedRun, shipped_published_runs
from service.domain.hardware import build_catalog

SECONDS_PER_HOUR = 3600.0
CATALOG = build_catalog()


# --- 1. a growing organisation --------------------------------------------------------------


@dataclass(frozen=True)
class TrueJob(Job):
    """A generated run: what the loop sees (Job) plus the truth behind it. `true_utilization`
    and `true_overhead` are the run's expected factors (no noise, no straggler, failures at
    their expected cost), so oracle_effective = true_utilization · (1 − true_overhead).
    `attempt_hours` are the running stretches (all but the last end FAILED) and `gap_hours`
    the restart time after each failed one."""

    true_utilization: float = math.nan
    true_overhead: float = math.nan
    straggler: bool = False
    attempt_hours: tuple[float, ...] = ()
    gap_hours: tuple[float, ...] = ()


@dataclass(frozen=True)
class OrgSegment:
    """One hardware segment's truth: u = utilization · size(params) / (1 + (gpus /
    gpus_half)^scale_exponent), times `shift` from SHIFT_DAY on; f0 the overhead without
    failures (data loading, evaluation, checkpoints)."""

    gpu: str
    precision: str
    utilization: float
    overhead: float
    gpus_half: float  # GPU count at which scaling halves utilization
    scale_exponent: float
    share: float
    shift: float = 1.0


ORG_SEGMENTS = (
    OrgSegment("h100-sxm", "bf16", 0.52, 0.06, 4096.0, 0.8, 0.38, shift=1.15),
    OrgSegment("h100-sxm", "fp8", 0.37, 0.07, 4096.0, 0.8, 0.22),
    OrgSegment("a100-80gb", "bf16", 0.56, 0.05, 2048.0, 0.7, 0.25),
    OrgSegment("mi300x", "bf16", 0.34, 0.08, 1024.0, 0.6, 0.15),
)
ORG_START = datetime(2026, 1, 5, tzinfo=UTC)
ORG_DAYS = 40 * 7
ORG_RUNS = 240
SHIFT_DAY = 18 * 7  # h100-sxm/bf16 gets a software upgrade (u × 1.15) in week 18
GROWTH_FROM = 0.5  # share of the period after which the organisation grows
GROWN_BY = 0.75  # share of the period by which the frontier reaches its top
LOG2_GPUS_EARLY = (3.0, 8.0)  # 8..256 GPUs in the first half
LOG2_GPUS_LAST = 11.0  # up to 2,048 GPUs at the end
PARAMS_EARLY = (1e9, 13e9)  # active parameters in the first half
PARAMS_LAST = 70e9  # up to 70B at the end
# Failures: a Poisson process on running GPU-hours. Llama 3 405B saw 466 interruptions in 54
# days on 16,384 H100 (2.2e-5 per GPU-hour, arXiv:2407.21783 §3.3.4); a smaller
# organisation's fleet fails more often. Each failure costs a lognormal restart time.
FAILURES_PER_GPU_HOUR = 5e-5
RESTART_HOURS_MEDIAN = 1.0
RESTART_LOG_SIGMA = 0.8
STRAGGLER_SHARE = 0.1  # a bad node: wall 2-3x, logged throughput unchanged
NO_THROUGHPUT_SHARE = 0.25
RUN_LOG_SIGMA = 0.07  # run-to-run noise of u (log space)
OVERHEAD_SD = 0.02  # run-to-run noise of f0
PLAN_EFFECTIVE = 0.35  # the e the organisation sizes its token budgets with
FLOPS_PER_PARAM_TOKEN = 6.0


def size_factor(params: float) -> float:
    """Utilization rises with model size (bigger matmuls), saturating: 0.65 at 1B, 0.90 at
    13B, 0.96 at 70B, never above 1."""
    return min(1.0, 1.0 - 0.35 * math.sqrt(1e9 / params))


def scale_factor(gpus: float, segment: OrgSegment) -> float:
    """Utilization falls with GPU count (communication), smoothly: not a power law."""
    return float(1.0 / (1.0 + (gpus / segment.gpus_half) ** segment.scale_exponent))


def expected_restart_hours() -> float:
    return RESTART_HOURS_MEDIAN * math.exp(RESTART_LOG_SIGMA**2 / 2.0)


def true_overhead(gpus: float, segment: OrgSegment) -> float:
    """Expected overhead: f0 plus failures. Running T hours on G GPUs fails λ·G·T times on
    average, each costing E[restart], so wall = T·(1 + λ·G·E[restart]) on average."""
    failure_load = FAILURES_PER_GPU_HOUR * gpus * expected_restart_hours()
    return 1.0 - (1.0 - segment.overhead) / (1.0 + failure_load)


def true_utilization(segment: OrgSegment, gpus: float, params: float, day: float) -> float:
    shift = segment.shift if day >= SHIFT_DAY else 1.0
    return segment.utilization * shift * size_factor(params) * scale_factor(gpus, segment)


def _growth(progress: float) -> float:
    """0 in the first half, rising linearly to 1 at GROWN_BY (share of the period)."""
    return min(1.0, max(0.0, (progress - GROWTH_FROM) / (GROWN_BY - GROWTH_FROM)))


def _frontier(progress: float) -> tuple[float, float]:
    """The largest log2 GPU count and parameter count the organisation runs at `progress`
    (0..1 of the period): the first half's ceiling, then growing geometrically to the top."""
    grown = _growth(progress)
    log2_gpus = LOG2_GPUS_EARLY[1] + grown * (LOG2_GPUS_LAST - LOG2_GPUS_EARLY[1])
    params = PARAMS_EARLY[1] * (PARAMS_LAST / PARAMS_EARLY[1]) ** grown
    return log2_gpus, params


def _draw_size(rng: np.random.Generator, progress: float) -> tuple[int, float]:
    """GPU count (multiple of 8) and active parameters, correlated: one size draw places a
    run between the smallest and the frontier on both; once the organisation grows, the
    draw leans to the frontier (U^(1/2) at the top: half the runs above 0.71 of it)."""
    log2_top, params_top = _frontier(progress)
    size = float(rng.random()) ** (1.0 / (1.0 + _growth(progress)))
    log2_gpus = LOG2_GPUS_EARLY[0] + size * (log2_top - LOG2_GPUS_EARLY[0])
    log2_gpus = float(np.clip(log2_gpus + rng.normal(0.0, 0.5), LOG2_GPUS_EARLY[0], log2_top))
    gpus = max(8, 8 * round(2.0**log2_gpus / 8))
    place = float(np.clip(size + rng.normal(0.0, 0.15), 0.0, 1.0))
    low = PARAMS_EARLY[0]
    params = round(low * (params_top / low) ** place / 1e8) * 1e8
    return gpus, params


def _draw_failures(
    rng: np.random.Generator, running_hours: float, gpus: int
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Running stretches between failures (exponential in running hours, rate λ·G) and the
    lognormal restart gap after each failure."""
    rate_per_hour = FAILURES_PER_GPU_HOUR * gpus
    attempts: list[float] = []
    left = running_hours
    while True:
        until_failure = float(rng.exponential(1.0 / rate_per_hour))
        if until_failure >= left:
            attempts.append(left)
            break
        attempts.append(until_failure)
        left -= until_failure
    gaps = rng.lognormal(math.log(RESTART_HOURS_MEDIAN), RESTART_LOG_SIGMA, len(attempts) - 1)
    return tuple(attempts), tuple(float(g) for g in gaps)


def _organisation_run(rng: np.random.Generator, index: int) -> TrueJob:
    shares = np.array([s.share for s in ORG_SEGMENTS])
    segment = ORG_SEGMENTS[int(rng.choice(len(ORG_SEGMENTS), p=shares / shares.sum()))]
    day = float(rng.uniform(0.0, ORG_DAYS - 1.0))
    progress = day / ORG_DAYS
    gpus, params = _draw_size(rng, progress)
    late = progress >= GROWTH_FROM
    seq_len = int(rng.choice([2048, 4096, 8192], p=[0.2, 0.4, 0.4] if late else [0.4, 0.4, 0.2]))
    global_batch_tokens = float(seq_len * gpus * int(rng.choice([1, 2, 4])))
    peak_flops = CATALOG.peak_flops(segment.gpu, segment.precision)
    planned_seconds = float(np.exp(rng.uniform(math.log(0.3), math.log(10.0)))) * 86400.0
    budget = planned_seconds * gpus * peak_flops * PLAN_EFFECTIVE / (FLOPS_PER_PARAM_TOKEN * params)
    tokens = max(1, round(budget / global_batch_tokens)) * global_batch_tokens
    flops = FLOPS_PER_PARAM_TOKEN * params * tokens

    u_true = true_utilization(segment, gpus, params, day)
    f_true = true_overhead(gpus, segment)
    u_run = u_true * float(rng.lognormal(0.0, RUN_LOG_SIGMA))
    f0_run = float(np.clip(segment.overhead + rng.normal(0.0, OVERHEAD_SD), 0.01, 0.4))
    straggler = bool(rng.random() < STRAGGLER_SHARE)
    stall = float(rng.uniform(2.0, 3.0)) if straggler else 1.0
    compute_hours = flops / (gpus * peak_flops * u_run) / SECONDS_PER_HOUR
    running_hours = compute_hours / (1.0 - f0_run) * stall
    attempts, gaps = _draw_failures(rng, running_hours, gpus)
    wall_hours = running_hours + sum(gaps)
    effective = flops / (gpus * peak_flops * wall_hours * SECONDS_PER_HOUR)
    throughput = bool(rng.random() >= NO_THROUGHPUT_SHARE)
    started = ORG_START + timedelta(days=day)
    return TrueJob(
        gpu=segment.gpu,
        precision=segment.precision,
        recompute=None,  # not recorded: this replay is about scale, not recomputation
        started_at=started,
        ended_at=started + timedelta(hours=wall_hours),
        effective=effective,
        utilization=u_run if throughput else None,
        overhead=1.0 - effective / u_run if throughput else None,
        oracle_effective=u_true * (1.0 - f_true),
        tag=f"{segment.gpu}/{segment.precision}#{index}",
        gpus=gpus,
        params=params,
        tokens=tokens,
        seq_len=seq_len,
        global_batch_tokens=global_batch_tokens,
        true_utilization=u_true,
        true_overhead=f_true,
        straggler=straggler,
        attempt_hours=attempts,
        gap_hours=gaps,
        failures=len(attempts) - 1,
    )


def growing_organisation(seed: int) -> list[TrueJob]:
    """ORG_RUNS runs over ORG_DAYS on four segments (numpy Generator seeded with `seed`).
    First half: 8-256 GPUs, 1-13B active parameters; from the middle on the frontier grows
    to 2,048 GPUs and 70B by week 30 and runs lean toward it. Truth: u saturates with model size and
    falls smoothly with GPU count (segment-specific half points), failures are Poisson on
    running GPU-hours with lognormal restart costs (so f grows with GPU count), one run in
    ten is on a bad node, h100-sxm/bf16 steps up 15% in week 18, a quarter of runs log no
    throughput. Sequence length and global batch are recorded but have no true effect (a
    covariate that should earn no slope). Token budgets are sized for ~0.3-10 days."""
    rng = np.random.default_rng(seed)
    return [_organisation_run(rng, index) for index in range(ORG_RUNS)]


# --- 2. MLPerf Training LLM results ---------------------------------------------------------

MLPERF_DIR = Path(__file__).resolve().parent / "data" / "mlperf"
# Publication day of each round's results (mlcommons.org results pages).
ROUND_DATES = {
    "v3.1": datetime(2023, 11, 8, 12, tzinfo=UTC),
    "v4.0": datetime(2024, 6, 12, 12, tzinfo=UTC),
    "v4.1": datetime(2024, 11, 13, 12, tzinfo=UTC),
}
# Catalog names (service.domain.hardware) of the chips the extraction names.
CHIP_GPUS = {
    "H100": "h100-sxm",
    "H200": "h200",
    "B200": "b200",
    "A100": "a100-80gb",
    "L40S": "l40s",
    "TPU-v5p": "tpu-v5p",
    "TPU-v5e": "tpu-v5e",
    "TPU-v6e": "tpu-v6e",
    "Gaudi2": "gaudi2",
}
# Dense bf16 peaks of chips the catalog lacks. Gaudi 2: 432 TFLOPS BF16 (Intel, "Intel Gaudi 3
# AI Accelerator: Architected for Gen AI Training and Inference", Hot Chips 2024, product
# table: Gaudi 60 / Gaudi 2 432 / Gaudi 3 1835 TFLOPs peak BF16).
EXTRA_BF16_PEAKS = {"gaudi2": 432e12}
GPT3_PARAMS = 175e9
LLAMA2_70B_PARAMS = 70e9
LORA_FLOPS_PER_PARAM_TOKEN = 4.0  # forward 2·N + activation gradients 2·N, frozen base
MLPERF_PRECISION = "bf16"


@dataclass(frozen=True)
class MlperfJob(Job):
    """One MLPerf submission as a job, with the fields the reference fit needs."""

    round: str = ""
    benchmark: str = ""
    chip: str = ""
    flops: float = 0.0


def benchmark_flops(benchmark: str, tokens: float) -> tuple[float, float]:
    """(active parameters, model FLOPs) of one submission, by the benchmark's own definition.

    gpt3 is GPT-3 175B pretraining (resumed from the reference checkpoint): 6·N·D with
    N = 175e9 and D = tokens_trained_median. Attention-score FLOPs (~3% of 6N at s = 2048)
    and the evaluations inside the timed region (~8-33% of forward work, by how eval tokens
    are counted) are left out: both are about the same share in every gpt3 submission, so
    they scale the benchmark's e, not its differences.

    llama2_70b_lora is LoRA fine-tuning of Llama 2 70B: the base weights are frozen, so each
    token costs a forward pass (2·N) and a backward pass through the frozen weights for the
    activation gradients (2·N) but no weight gradients (the 2·N that makes 6·N in
    pretraining): 4·N·D with N = 70e9 and D = samples × 8192 packed tokens. The rank-16
    adapters' own FLOPs are below 1% of 4·N and left out, as are attention scores (~23% of
    4·N at s = 8192) and evaluation (~14%), for the same reason as gpt3's. The reasoning and
    the architecture figures: bench/data/mlperf/README.md, "Notes for counting FLOPs"."""
    if benchmark == "gpt3":
        return GPT3_PARAMS, FLOPS_PER_PARAM_TOKEN * GPT3_PARAMS * tokens
    if benchmark == "llama2_70b_lora":
        return LLAMA2_70B_PARAMS, LORA_FLOPS_PER_PARAM_TOKEN * LLAMA2_70B_PARAMS * tokens
    raise ValueError(f"no FLOP count for MLPerf benchmark {benchmark!r}")


def chip_peak_flops(gpu: str) -> float:
    """Dense bf16 peak per accelerator: the catalog's, or EXTRA_BF16_PEAKS'."""
    if gpu in EXTRA_BF16_PEAKS:
        return EXTRA_BF16_PEAKS[gpu]
    return CATALOG.peak_flops(gpu, MLPERF_PRECISION)


def _mlperf_job(row: dict[str, str]) -> MlperfJob:
    gpu = CHIP_GPUS[row["chip"]]
    accelerators = int(row["accelerators"])
    tokens = float(row["tokens_trained_median"])
    params, flops = benchmark_flops(row["benchmark"], tokens)
    wall_seconds = float(row["time_to_train_minutes_olympic"]) * 60.0
    effective = flops / (accelerators * chip_peak_flops(gpu) * wall_seconds)
    seq_len = int(row["seq_len"])
    started = ROUND_DATES[row["round"]]
    return MlperfJob(
        gpu=gpu,
        precision=MLPERF_PRECISION,
        recompute=None,
        started_at=started,
        ended_at=started + timedelta(seconds=wall_seconds),
        effective=effective,
        utilization=None,  # time to train only: no throughput split
        overhead=None,
        oracle_effective=effective,  # no truth for real runs: scored as exact
        tag=f"{row['round']} {row['benchmark']} {row['submitter']}/{row['system']}",
        gpus=accelerators,
        params=params,
        tokens=tokens,
        seq_len=seq_len,
        global_batch_tokens=float(row["global_batch_size"]) * seq_len,
        round=row["round"],
        benchmark=row["benchmark"],
        chip=row["chip"],
        flops=flops,
    )


def mlperf_jobs(path: Path = MLPERF_DIR / "mlperf_llm.csv") -> list[MlperfJob]:
    """One job per distinct MLPerf submission (rows re-publishing another's runs and the
    unreadable one with runs = 0 dropped), in round order. Wall = the raw olympic time to
    train (not RCP-scaled). Every round's runs start at its publication day, so a
    time-ordered replay predicts each round from the earlier ones only.

    Precision is bf16 throughout and e is counted against the dense bf16 peak: which
    submissions ran fp8 is not in the logs, so NVIDIA's fp8 runs show e above what a bf16
    run could reach (it is the ratio to a bf16 peak, not an MFU)."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = [
            row
            for row in csv.DictReader(handle)
            if not row["duplicate_of"].strip() and int(row["runs"]) > 0
        ]
    jobs = [_mlperf_job(row) for row in rows]
    return sorted(jobs, key=lambda job: (job.started_at, job.tag))


# --- 3. published runs ----------------------------------------------------------------------


def published_jobs(
    runs: Sequence[PublishedRun] | None = None,
) -> list[tuple[PublishedRun, Job]]:
    """bench_calibration_eval's published-run jobs (the rows it can date), each with the
    covariates the table gives (GPU count, active parameters, tokens, sequence length; no
    global batch). Pairs, because a leave-one-out rebuilds the prior from the other rows."""
    pairs = _published_pairs(shipped_published_runs() if runs is None else runs)
    return [
        (
            run,
            replace(
                job, gpus=run.gpu_count, params=run.params, tokens=run.tokens, seq_len=run.seq_len
            ),
        )
        for run, job in pairs
    ]
