"""The factor model's value types and how a factor set is used: per-segment factors with their
predictive spread, the published prior, numbered factor sets, and the lookup that turns a
set into a P50 and a range for one request. Pure; no fitting here (service.calibration.fit),
no I/O. The method, its choices and their measurements: docs/calibration.md, "The factor
model and its predictive distribution"."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from statistics import NormalDist
from typing import Literal

from service.domain.errors import NotFoundError, require_positive
from service.domain.values import DEFAULT_HALF_LIFE_DAYS, Factors, Interval

Level = Literal["segment", "gpu", "precision", "all", "prior"]
ALL_KEY = "*"
PRIOR_KEY = "prior"
Z90 = 1.2815515655446004  # standard normal 90th percentile: P10/P90 = P50·exp(∓Z90·σ)
MAX_OVERHEAD = 0.95
# A run this many half-lives old weighs 0.5**15 ≈ 3e-5 of a new one: the refit reads and the
# backtest fits only runs younger than that (see `horizon_seconds` in service.calibration.fit).
NEGLIGIBLE_HALF_LIVES = 15.0


@dataclass(frozen=True)
class FitParameters:
    """Knobs of the fit. Defaults judged on every replay and seed of the evaluation
    harness at once (bench/bench_calibration_eval.py), never on one."""

    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    # Spread of a segment's effect around its parent assumed before the data say otherwise
    # (log space), blended with the between-segment variance estimated from the data.
    tau_default: float = 0.2
    # The same for a precision's effect across GPUs: utilization is counted against each
    # precision's own peak (fp8's is twice bf16's, fp32's a fraction), so precisions differ
    # by more than GPUs do at one precision (DeepSeek-V3's fp8 runs reached about half
    # the MFU that bf16 runs report). Only what the hyperprior is centred on: τ is fitted.
    precision_tau_default: float = 0.4
    # The same for a gpu/precision/recompute group around its gpu/precision segment: wall
    # time is planned on hardware FLOPs, which already count the recomputation, so a
    # segment's recompute modes differ by little unless the data show more (τ² is still
    # estimated from the groups; this is only what it is blended with).
    recompute_tau_default: float = 0.05
    # Pseudo-observations of the level's typical within-segment scale that a segment's own
    # scale is blended with (a two-run segment cannot know its own noise).
    scale_strength: float = 3.0
    prior_sigma: float = 0.2  # within-segment σ0 (log space) when a level has no spread yet
    min_recompute_n: int = 5
    # gpu/precision/recompute entries exist only when the recompute groups' log e differs from
    # their segments' beyond noise (Cochran's Q at this level, service.calibration.fit): without a
    # real difference, fitting each mode on its share of the runs only adds noise.
    heterogeneity_alpha: float = 0.01
    huber_c: float = 1.345  # in robust scale units (95% efficiency under normal noise)
    # Runs farther than this many robust scales from their group's location are treated as
    # stragglers: left out of the location and scale, carried by the calibrated upper tail.
    reject_z: float = 3.0
    # Level shifts: a sequential test on the segment's latest runs (service.calibration.change).
    change_z: float = 3.25
    change_discount: float = 0.05  # weight multiplier for runs before a detected change
    thin_n: int = 10  # below this many runs, a segment's range is never narrower than its parent's
    # Scale slopes (service.calibration.scaling): a slope needs this many runs that know its
    # covariate, this much spread of it within segments (log units: 0.25 ≈ a factor 1.3),
    # and |slope| of at least this many standard errors.
    min_slope_n: int = 20
    min_slope_spread: float = 0.25
    slope_z: float = 3.0
    # ... and must matter: at least this change of log utilization over one within-segment
    # standard deviation of its covariate (a 2% effect is below what a plan can use).
    min_slope_effect: float = 0.02
    # A term the active set has stays while its evidence is at least this share of what a
    # new one needs (hysteresis: a term near the bar does not come and go night by night;
    # growing organisation 1.42 -> 1.39x the oracle, docs/calibration.md).
    keep_support: float = 0.4
    # A segment's own GPU slope is its deviation from the shared one with this prior spread
    # (log-log): interconnects differ, but a few runs of one segment should not make its own.
    slope_tau: float = 0.05
    # Failures earn a term of their own once the runs have counted at least this many
    # FAILED/KILLED segments: the cost of one failure is a regression coefficient.
    min_failures: float = 5.0

    def __post_init__(self) -> None:
        require_positive(self.half_life_days, "half_life_days")
        require_positive(self.tau_default, "tau_default")
        require_positive(self.precision_tau_default, "precision_tau_default")
        require_positive(self.recompute_tau_default, "recompute_tau_default")
        require_positive(self.scale_strength, "scale_strength")
        require_positive(self.prior_sigma, "prior_sigma")
        require_positive(self.huber_c, "huber_c")
        require_positive(self.min_recompute_n, "min_recompute_n")
        if not 0.0 < self.heterogeneity_alpha < 1.0:
            raise ValueError("heterogeneity_alpha must be between 0 and 1")
        require_positive(self.reject_z, "reject_z")
        require_positive(self.change_z, "change_z")
        require_positive(self.change_discount, "change_discount")
        require_positive(self.slope_tau, "slope_tau")


@dataclass(frozen=True)
class SegmentFactors:
    """The fitted factors of one segment key at one pooling level. `log_sigma` is the
    model's predictive σ of log wall time; `log_sigma_low`/`log_sigma_high` the calibrated
    σ below/above the median; `n` counts observations, `n_throughput` those with
    throughput; `combined_only` means u came from the parent level; `fallback` means the
    calibrated factors backtested worse than a baseline, so estimates use that baseline: the
    raw factors, or with `by_hand` the stored hand baseline."""

    segment: str
    level: Level
    utilization: float
    utilization_p10: float
    utilization_p90: float
    overhead: float
    overhead_p10: float
    overhead_p90: float
    log_sigma: float
    n: int
    n_throughput: int
    combined_only: bool
    log_sigma_low: float
    log_sigma_high: float
    fallback: bool = False
    # With `fallback`: the factors are the hand baseline (service.calibration.by_hand, the
    # median observed e of the key's runs), served as stored; without it, raw.
    by_hand: bool = False
    # Scale (service.calibration.scaling): the levels are at the reference GPU count and
    # parameter count (logs); slopes of log utilization on their logs, 0 where unsupported.
    gpus_slope: float = 0.0
    gpus_slope_se: float = 0.0
    log_gpus_reference: float = 0.0
    params_slope: float = 0.0
    params_slope_se: float = 0.0
    log_params_reference: float = 0.0
    # Model size bends (log u gains b_NN·Δ², Δ = log N − log N_ref) within the range of log
    # parameters fitted on, and goes on along its tangent beyond it.
    params_curvature: float = 0.0
    params_curvature_se: float = 0.0
    log_params_low: float = 0.0
    log_params_high: float = 0.0
    # Failures: FAILED/KILLED segments per GPU-hour and the hours one costs (overhead grows
    # with GPU count: 1 − f = (1 − f₀)/(1 + cost · rate · G)).
    failure_rate: float = 0.0
    failure_cost_hours: float = 0.0
    failure_cost_se: float = 0.0
    # Tokens per GPU per optimizer step: log u gains b_B·(log(B/G) − reference) where the
    # job states its global batch B (tokens per step).
    batch_slope: float = 0.0
    batch_slope_se: float = 0.0
    log_batch_reference: float = 0.0
    # GPU count bends as model size does (log u gains b_GG·Δ², Δ = log G − log G_ref) within
    # the range of log GPU counts fitted on, and goes on along its tangent beyond it.
    gpus_curvature: float = 0.0
    gpus_curvature_se: float = 0.0
    log_gpus_low: float = 0.0
    log_gpus_high: float = 0.0
    # The GPU counts, parameter counts and tokens of the runs the entry was fitted on.
    gpus_min: float | None = None
    gpus_max: float | None = None
    params_min: float | None = None
    params_max: float | None = None
    tokens_min: float | None = None
    tokens_max: float | None = None

    @property
    def effective(self) -> float:
        return self.utilization * (1.0 - self.overhead)

    @property
    def fallback_to(self) -> str | None:
        """What a fallen-back entry serves ("raw" or "by_hand"); None when it did not."""
        if not self.fallback:
            return None
        return "by_hand" if self.by_hand else "raw"


@dataclass(frozen=True)
class Prior:
    """Published-run factors the pooling starts from (see service.calibration.priors)."""

    utilization: float
    overhead: float
    log_sigma: float
    sources: tuple[str, ...]

    def __post_init__(self) -> None:
        require_positive(self.utilization, "prior utilization")
        require_positive(self.log_sigma, "prior log_sigma")
        if not 0 <= self.overhead <= MAX_OVERHEAD:
            raise ValueError(f"prior overhead must be in [0, {MAX_OVERHEAD}]")


@dataclass(frozen=True)
class FactorSet:
    """An immutable, numbered refit result with its provenance and backtest scores. The
    active set is the one calibrated estimates use unless a version is pinned."""

    version: int
    created_at: datetime
    activated_at: datetime | None
    segments: Mapping[str, SegmentFactors]
    method: str
    parameters: Mapping[str, float]
    provenance: Mapping[str, object]
    reconciliation_count: int
    backtest_score: float | None  # candidate's median APE in the time-ordered backtest
    baseline_score: float | None  # the active set's (or the prior's) on the same targets
    forced: bool = False


@dataclass(frozen=True)
class BacktestResult:
    """Median absolute percentage error of predicted vs observed wall time, the share of
    targets inside P10-P90, and the number of targets (None scores when n is 0)."""

    n: int
    median_ape: float | None
    coverage: float | None


def clamp_overhead(value: float) -> float:
    return min(max(value, 0.0), MAX_OVERHEAD)


def utilization_range(utilization: float, spread: float) -> tuple[float, float]:
    """P10 and P90 of a utilization `spread` (a factor ≥ 1) around it, never above 1: a chip
    cannot run above its peak, so a range that would is capped there (`reckon factors`
    says so)."""
    return min(utilization / spread, 1.0), min(utilization * spread, 1.0)


def prior_factors(prior: Prior) -> SegmentFactors:
    """The prior as a factor set entry (level "prior", n = 0), the last fallback."""
    return raw_factors(PRIOR_KEY, "prior", Factors(prior.utilization, prior.overhead), prior)


def raw_factors(key: str, level: Level, factors: Factors, prior: Prior) -> SegmentFactors:
    """Given factors with the prior's deliberately wide spread, on every side."""
    spread = math.exp(Z90 * prior.log_sigma)
    u, f = factors.utilization, clamp_overhead(factors.overhead)
    u_p10, u_p90 = utilization_range(u, spread)
    return SegmentFactors(
        segment=key,
        level=level,
        utilization=u,
        utilization_p10=u_p10,
        utilization_p90=u_p90,
        overhead=f,
        overhead_p10=clamp_overhead(1.0 - (1.0 - f) * spread),
        overhead_p90=clamp_overhead(1.0 - (1.0 - f) / spread),
        log_sigma=prior.log_sigma,
        n=0,
        n_throughput=0,
        combined_only=False,
        log_sigma_low=prior.log_sigma,
        log_sigma_high=prior.log_sigma,
    )


def parent_key(key: str) -> str | None:
    """The next broader key: gpu/precision/recompute → gpu/precision → gpu → "*" → prior;
    a precision's key "*/precision" → "*"."""
    if key == PRIOR_KEY:
        return None
    if key == ALL_KEY:
        return PRIOR_KEY
    if "/" not in key:
        return ALL_KEY
    return key.rsplit("/", 1)[0]


def precision_key(precision: str) -> str:
    """The key of a precision's level across GPUs (what a GPU without runs borrows)."""
    return f"{ALL_KEY}/{precision}"


def lookup(
    factors: Mapping[str, SegmentFactors], gpu: str, precision: str, recompute: str | None
) -> SegmentFactors:
    """The most specific entry available: gpu/precision/recompute, gpu/precision; for a
    combination without runs whose GPU and precision both have runs elsewhere, the GPU's
    and the precision's effects combined (`combine`); else the GPU's entry (a precision it
    never ran), the precision's "*/precision" (a GPU without runs), "*", then the prior."""
    keys = [f"{gpu}/{precision}"]
    if recompute is not None:
        keys.insert(0, f"{gpu}/{precision}/{recompute}")
    for key in keys:
        if key in factors:
            return factors[key]
    by_gpu, by_precision = factors.get(gpu), factors.get(precision_key(precision))
    everyone = factors.get(ALL_KEY)
    if by_gpu is not None and by_precision is not None and everyone is not None:
        return combine(by_gpu, by_precision, everyone)
    for key in (gpu, precision_key(precision), ALL_KEY, PRIOR_KEY):
        if key in factors:
            return factors[key]
    raise NotFoundError(f"no factors for {gpu}/{precision} and no prior in the factor set")


def combine(
    by_gpu: SegmentFactors, by_precision: SegmentFactors, everyone: SegmentFactors
) -> SegmentFactors:
    """A gpu/precision never run, from the fit's additive effects in log space: level +
    GPU effect + precision effect = GPU entry × precision entry / "*". Its ranges are the
    wider of the two entries' on each side (never narrower than either parent). If either
    entry fell back, that entry is used as it is (raw, flagged)."""
    for entry in (by_gpu, by_precision):
        if entry.fallback:
            return entry
    utilization = by_gpu.utilization * by_precision.utilization / everyone.utilization
    effective = by_gpu.effective * by_precision.effective / everyone.effective
    overhead = clamp_overhead(1.0 - effective / utilization)
    utilization = effective / (1.0 - overhead)  # keeps U·(1−F) = E when clamped
    u_spread = max(entry.utilization / entry.utilization_p10 for entry in (by_gpu, by_precision))
    keep_spread = max(
        (1.0 - entry.overhead_p10) / (1.0 - entry.overhead) for entry in (by_gpu, by_precision)
    )
    u_p10, u_p90 = utilization_range(utilization, u_spread)
    return replace(
        by_gpu,
        segment=f"{by_gpu.segment}+{by_precision.segment}",
        utilization=utilization,
        utilization_p10=u_p10,
        utilization_p90=u_p90,
        overhead=overhead,
        overhead_p10=clamp_overhead(1.0 - (1.0 - overhead) * keep_spread),
        overhead_p90=clamp_overhead(1.0 - (1.0 - overhead) / keep_spread),
        log_sigma=max(by_gpu.log_sigma, by_precision.log_sigma),
        n=0,
        n_throughput=0,
        combined_only=False,
        log_sigma_low=max(by_gpu.log_sigma_low, by_precision.log_sigma_low),
        log_sigma_high=max(by_gpu.log_sigma_high, by_precision.log_sigma_high),
    )


def choose(
    factors: Mapping[str, SegmentFactors],
    gpu: str,
    precision: str,
    recompute: str | None,
    requested: Factors,
) -> SegmentFactors:
    """What a calibrated estimate uses: `lookup`'s entry, except that a segment that fell
    back to raw (calibration backtested worse than raw there) gets the planner's
    `requested` factors, with the stored (prior-wide) spread and the fallback flag kept; one
    that fell back to the hand baseline is served as stored."""
    chosen = lookup(factors, gpu, precision, recompute)
    if not chosen.fallback or chosen.by_hand:
        return chosen
    u, f = requested.utilization, clamp_overhead(requested.overhead)
    spread_u = chosen.utilization / chosen.utilization_p10
    u_p10, u_p90 = utilization_range(u, spread_u)
    return replace(
        chosen,
        utilization=u,
        utilization_p10=u_p10,
        utilization_p90=u_p90,
        overhead=f,
        overhead_p10=clamp_overhead(1.0 - (1.0 - f) * spread_u),
        overhead_p90=clamp_overhead(1.0 - (1.0 - f) / spread_u),
    )


def predict_wall_seconds(
    flops: float, gpus: int, peak_flops: float, factors: SegmentFactors
) -> float:
    """Median wall seconds: hardware FLOPs / (gpus · peak · u · (1−f))."""
    require_positive(flops, "flops")
    require_positive(gpus, "gpus")
    require_positive(peak_flops, "peak_flops")
    return flops / (gpus * peak_flops * factors.effective)


def interval(wall_p50_seconds: float, factors: SegmentFactors) -> Interval:
    """P10/P50/P90 wall seconds: the segment's split lognormal around the median."""
    return Interval(
        wall_quantile(wall_p50_seconds, factors, 0.1),
        wall_p50_seconds,
        wall_quantile(wall_p50_seconds, factors, 0.9),
    )


def wall_quantile(wall_p50_seconds: float, factors: SegmentFactors, q: float) -> float:
    """Wall seconds at quantile `q` in (0, 1) of the segment's predictive distribution."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be strictly between 0 and 1, got {q}")
    z = NormalDist().inv_cdf(q)
    sigma = factors.log_sigma_high if z > 0 else factors.log_sigma_low
    return wall_p50_seconds * math.exp(z * sigma)
