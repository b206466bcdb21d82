"""Predicted against observed (docs/contract.md §3 step 5), pure: which runs are usable, the
observed wall and compute time of an estimate's runs, the implied factors, and the seed-style
line. No I/O and no clock; the reconcile pass feeds it stored estimates and observed runs."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from service.domain import bounds
from service.domain.configuration import Configuration, PeakLookup
from service.domain.configuration import observed as observed_config
from service.domain.records import (
    OVERHEAD_CLAMPED,
    TERMINAL_STATUSES,
    FactorsKind,
    ObservedRun,
    Planned,
    Reconciliation,
    SavedEstimate,
    Skip,
)
from service.domain.units import format_duration

# Skip reasons: stable codes, stored and counted.
MISSING_START = "missing_start_time"
MISSING_END = "missing_end_time"
END_BEFORE_START = "end_before_start"
BAD_THROUGHPUT = "bad_throughput"
UNKNOWN_ESTIMATE = "unknown_estimate"
CLAIMED_TWICE = "claimed_by_two_estimates"
ZERO_LENGTH = "zero_length"
IMPLAUSIBLE_FACTORS = "implausible_factors"
# What a reconciliation may teach the refit: utilization above this (half a percent of the
# chip's peak) and at most 1, overhead at most this share of wall time.
MIN_UTILIZATION = 0.005
MAX_OVERHEAD = 0.95
UNSTORABLE = "unstorable_value"
MISSING_EXPERIMENT = "missing_experiment"
IMPLAUSIBLE_TIMES = "implausible_times"
# No GPU training run Reckon judges started before this, or ran longer than this: times
# beyond them are a clock or an import error (a start 1 ms after the epoch, in 1974). Three
# years, not one: the article's own seed job (7B on 8 A100s) is about 650 days of wall time.
EARLIEST_START = datetime(2015, 1, 1, tzinfo=UTC)
LONGEST_RUN = timedelta(days=3 * 365)

# MLflow reports an unset start as 0 ms: the epoch itself is "no start time", not 1970.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def admit(run: ObservedRun) -> tuple[ObservedRun | None, list[Skip]]:
    """The run as it may be stored, and why anything was dropped: the boundary between
    MLflow's data and our columns. A run whose id, experiment or status cannot be stored is
    dropped whole; a tag that cannot be an estimate id (too long, NUL) links to nothing; an
    unusable throughput is dropped while the wall time still counts (SQLite would store NaN
    as NULL and hide it)."""
    skips: list[Skip] = []
    for name, value, limit in (
        ("run id", run.run_id, bounds.RUN_ID_CHARS),
        ("experiment id", run.experiment_id, bounds.EXPERIMENT_ID_CHARS),
        ("status", run.status, bounds.STATUS_CHARS),
    ):
        problem = bounds.text_problem(value, limit)
        if problem is not None:
            detail = f"{name} {bounds.shown(value)} {problem}; run not stored"
            return None, [Skip(_storable_id(run.run_id), UNSTORABLE, detail, None)]
    tag = run.estimate_id
    if tag is not None:
        problem = bounds.text_problem(tag, bounds.ESTIMATE_ID_CHARS)
        if problem is not None:
            detail = f"tag {bounds.shown(tag)} {problem}: it names no estimate"
            skips.append(Skip(run.run_id, UNKNOWN_ESTIMATE, detail, None))
            run = dataclasses.replace(run, estimate_id=None)
    bad_throughput = throughput_problem(run)
    if bad_throughput is not None:
        skips.append(bad_throughput)
        run = dataclasses.replace(run, throughput=None)
    return _storable_configuration(run), skips


def _storable_configuration(run: ObservedRun) -> ObservedRun:
    """What the run states about its configuration, where a column can hold it; a value
    that cannot be stored is unsaid (the plan's stands in, and the reconciliation says so)."""
    gpus, tokens, precision = run.gpus, run.tokens, run.precision
    if gpus is not None and not 0 < gpus <= bounds.INT_MAX:
        gpus = None
    if tokens is not None and not (math.isfinite(tokens) and tokens > 0):
        tokens = None
    if precision is not None and bounds.text_problem(precision, bounds.PRECISION_CHARS):
        precision = None
    if (gpus, tokens, precision) == (run.gpus, run.tokens, run.precision):
        return run
    return dataclasses.replace(run, gpus=gpus, tokens=tokens, precision=precision)


def _storable_id(run_id: str) -> str:
    """A key for the skip row of a run whose own id cannot be stored (the detail has it)."""
    cleaned = run_id.replace("\x00", "\\0")
    return cleaned[: bounds.RUN_ID_CHARS]


def missing_experiment(name: str) -> Skip:
    """A configured experiment MLflow does not have (or has deleted): recorded under its
    name in the run-id key, once; the pass read the others."""
    return Skip(
        _storable_id(f"experiment:{name}"),
        MISSING_EXPERIMENT,
        f"MLflow experiment {name!r} (RECKON_EXPERIMENTS) does not exist or is deleted; "
        "the other experiments were read",
    )


def run_problem(run: ObservedRun) -> Skip | None:
    """Why a terminated run's times cannot be used, or None when they can."""
    if run.started_at is None or run.started_at <= EPOCH:
        return Skip(run.run_id, MISSING_START, "run has no start time", run.estimate_id)
    if run.status in TERMINAL_STATUSES and run.ended_at is None:
        return Skip(run.run_id, MISSING_END, f"{run.status} run has no end time", run.estimate_id)
    if run.started_at < EARLIEST_START:
        detail = f"starts {run.started_at.isoformat()}, before {EARLIEST_START.year}"
        return Skip(run.run_id, IMPLAUSIBLE_TIMES, detail, run.estimate_id)
    if run.ended_at is not None and run.ended_at - run.started_at > LONGEST_RUN:
        length = (run.ended_at - run.started_at).days
        detail = f"runs {length} days, longer than {LONGEST_RUN.days} days"
        return Skip(run.run_id, IMPLAUSIBLE_TIMES, detail, run.estimate_id)
    if run.ended_at is not None and run.ended_at < run.started_at:
        return Skip(
            run.run_id,
            END_BEFORE_START,
            f"ends {run.ended_at.isoformat()} before it starts {run.started_at.isoformat()}",
            run.estimate_id,
        )
    if run.status in TERMINAL_STATUSES and run.ended_at == run.started_at:
        return Skip(run.run_id, ZERO_LENGTH, "run ends the moment it starts", run.estimate_id)
    return None


def throughput_problem(run: ObservedRun) -> Skip | None:
    """A logged throughput that is zero, negative, NaN or infinite is ignored (the run's
    wall time still counts) and the reason recorded."""
    derived = run.observables
    if derived is not None and derived.problem is not None:  # the run's profile said why
        reason, detail = derived.problem
        return Skip(run.run_id, reason, detail, run.estimate_id)
    value = run.throughput
    if value is None or (math.isfinite(value) and value > 0):
        return None
    return Skip(
        run.run_id,
        BAD_THROUGHPUT,
        f"throughput {value!r} ignored; wall time still used",
        run.estimate_id,
    )


def reconcile(saved: SavedEstimate, runs: Sequence[ObservedRun]) -> Reconciliation | None:
    """The comparison for one estimate, or None while no linked run has FINISHED (or when
    the runs' numbers are implausible: `judge` says why)."""
    return judge(Planned.of(saved), runs)[0]


def judge(
    plan: Planned, runs: Sequence[ObservedRun], peaks: PeakLookup | None = None
) -> tuple[Reconciliation | None, Skip | None]:
    """The comparison for one estimate over all its usable linked runs (None while no
    linked run has FINISHED), and a skip when something in it was implausible. The factors
    are implied at the configuration the runs observed (service.domain.configuration; `peaks`
    gives the peak of a precision other than the plan's), the error against the plan. Wall time runs
    from the first start to the last end, so restarts, gaps and FAILED/KILLED segments count
    as overhead. A throughput implying a utilization outside (MIN_UTILIZATION, 1] or an
    overhead outside [0, MAX_OVERHEAD] is dropped (the reconciliation keeps only the
    combined factor); a wall time implying an effective utilization outside that range keeps
    only the time comparison (no factor for the refit). Either is an `implausible_factors`
    skip naming the values. Nothing non-finite is returned."""
    usable = [
        run
        for run in runs
        if run.status in TERMINAL_STATUSES and run_problem(run) is None and run.ended_at
    ]
    if not any(run.status == "FINISHED" for run in usable):
        return None, None
    usable.sort(key=lambda run: (run.started_at or EPOCH, run.run_id))
    last = max(usable, key=lambda run: (run.ended_at or EPOCH, run.run_id))
    started_at = min(run.started_at for run in usable if run.started_at)
    ended_at = max(run.ended_at for run in usable if run.ended_at)
    observed = (ended_at - started_at).total_seconds()
    if observed <= 0:
        return None, Skip(last.run_id, ZERO_LENGTH, "the runs span no time", plan.id)
    predicted = plan.predicted_wall_seconds
    chosen = _compute_run(usable)
    ordered = [run for run in (chosen, *reversed(usable)) if run is not None]
    config = observed_config(plan, ordered, peaks)
    compute_seconds, profile = _observed_compute_seconds(chosen, config.tokens)
    implied_u, implied_f, effective_u, kind = _implied_factors(config, observed, compute_seconds)
    clamped = implied_f is not None and implied_f < 0
    if clamped:
        implied_f = 0.0  # the run timed more compute than wall (HF): never a negative share
    skip = None
    if kind == "separate" and not _plausible(implied_u, implied_f):
        detail = (
            f"throughput implies utilization {_shown(implied_u)} and overhead "
            f"{_shown(implied_f)} (plausible: ({MIN_UTILIZATION}, 1] and [0, {MAX_OVERHEAD}]); "
            "only the combined factor is kept"
        )
        skip = Skip(last.run_id, IMPLAUSIBLE_FACTORS, detail, plan.id)
        compute_seconds, implied_u, implied_f, kind = None, None, None, "combined"
    if effective_u is not None and not _plausible(effective_u, 0.0):
        detail = (
            f"wall time {observed:.0f} s implies effective utilization {_shown(effective_u)} "
            f"(outside ({MIN_UTILIZATION}, 1] of the hardware's peak); only the time "
            "comparison is kept"
        )
        skip = Skip(last.run_id, IMPLAUSIBLE_FACTORS, detail, plan.id)
        compute_seconds, implied_u, implied_f, effective_u, kind = None, None, None, None, "none"
    item = Reconciliation(
        estimate_id=plan.id,
        run_ids=tuple(run.run_id for run in usable),
        gpu=plan.gpu,
        precision=config.precision,
        recompute=plan.recompute,
        started_at=started_at,
        ended_at=ended_at,
        predicted_seconds=predicted,
        predicted_seconds_p10=plan.p10,
        predicted_seconds_p90=plan.p90,
        observed_seconds=observed,
        observed_compute_seconds=compute_seconds,
        ratio=observed / predicted,
        error_pct=100.0 * (predicted / observed - 1.0),
        abs_error_pct=100.0 * abs(predicted / observed - 1.0),
        implied_utilization=implied_u,
        implied_overhead=implied_f,
        implied_effective_utilization=effective_u,
        factors_kind=kind,
        failed_segments=sum(1 for run in usable if run.status != "FINISHED"),
        profile=profile,
        note=OVERHEAD_CLAMPED if clamped and kind == "separate" else None,
        kind=plan.kind,
        config_check=config.check,
        params=plan.params,
        global_batch_tokens=plan.global_batch_tokens,
        planned_gpus=plan.gpus,
        planned_tokens=plan.tokens,
        planned_precision=plan.precision,
        observed_gpus=config.observed_gpus,
        observed_tokens=config.observed_tokens,
        observed_precision=config.observed_precision,
        observed_global_batch_tokens=config.observed_global_batch_tokens,
    )
    numbers = (item.ratio, item.error_pct, item.predicted_seconds, item.observed_seconds)
    if not all(math.isfinite(value) for value in numbers):
        detail = f"predicted {predicted!r} s against observed {observed!r} s is not a number"
        return None, Skip(last.run_id, IMPLAUSIBLE_FACTORS, detail, plan.id)
    return item, skip


def _shown(value: float | None) -> str:
    return repr(value) if value is None or not math.isfinite(value) else f"{value:.4g}"


def _plausible(utilization: float | None, overhead: float | None) -> bool:
    """u in (MIN_UTILIZATION, 1] and f in [0, MAX_OVERHEAD], both finite: beyond them a run
    did not train what its estimate says (a CPU run imported as a GPU, a job that mostly
    waited), and its factors would only teach the refit noise."""
    if utilization is None or overhead is None:
        return False
    return MIN_UTILIZATION < utilization <= 1.0 and 0.0 <= overhead <= MAX_OVERHEAD


def _compute_run(runs: Sequence[ObservedRun]) -> ObservedRun | None:
    """The run whose rate (or own compute time) stands for the job: the last FINISHED
    segment with one, else any segment's."""
    candidates = [
        run
        for run in runs
        if throughput_problem(run) is None and (run.throughput or run.compute_seconds)
    ]
    if not candidates:
        return None
    finished = [run for run in candidates if run.status == "FINISHED"]
    return max(finished or candidates, key=lambda run: (run.ended_at or EPOCH, run.run_id))


def _observed_compute_seconds(
    chosen: ObservedRun | None, tokens: float | None
) -> tuple[float | None, str | None]:
    """tokens / steady-state whole-job throughput, and the profile it was read with. A run
    whose profile gives a compute time but no rate (HF without token counting) contributes
    that time as it is."""
    if chosen is None or tokens is None:
        return None, None
    seconds = tokens / chosen.throughput if chosen.throughput else chosen.compute_seconds
    if seconds is None or not seconds > 0:
        return None, chosen.profile  # zero or NaN seconds: no factor can come from them
    # An infinite or absurd time is kept: the factors it implies are then judged implausible.
    return seconds, chosen.profile


def _implied_factors(
    config: Configuration, observed_seconds: float, compute_seconds: float | None
) -> tuple[float | None, float | None, float | None, FactorsKind]:
    if config.flops is None or config.peak_flops is None:
        return None, None, None, "none"
    capacity = config.gpus * config.peak_flops  # FLOP/s at 100%
    effective = config.flops / (capacity * observed_seconds)
    if compute_seconds is None:
        return None, None, effective, "combined"
    utilization = config.flops / (capacity * compute_seconds)
    overhead = 1.0 - compute_seconds / observed_seconds
    return utilization, overhead, effective, "separate"


def human_line(predicted_seconds: float, observed_seconds: float) -> str:
    """The seed's comparison: "predicted 3 days 12 hours, observed 3 days 8 hours, +5.0% over"."""
    error = 100.0 * (predicted_seconds / observed_seconds - 1.0)
    direction = "over" if error >= 0 else "under"
    return (
        f"predicted {format_duration(predicted_seconds)}, observed "
        f"{format_duration(observed_seconds)}, {error:+.1f}% {direction}"
    )
