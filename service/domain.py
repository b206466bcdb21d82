"""Value types and errors shared by every layer. Frozen dataclasses only: no I/O, no clock,
no framework imports, so the math and the use cases can be tested with plain values."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from service import bounds

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[Recompute, ...] = ("none", "selective", "full")
FORMULA_VERSION = "reckon-flops-1"  # bump when the math in flops.py changes meaning
DEFAULT_UTILIZATION = 0.4  # the seed's baseline; used only when no factor set is asked for
DEFAULT_OVERHEAD = 0.0
_CURRENCY = re.compile(r"[A-Z]{3}")  # ISO 4217 style
DEFAULT_HALF_LIFE_DAYS = 45.0  # the refit's recency weighting: a run this old weighs half


class ReckonError(Exception):
    """Base of every error a user may see; its message is one line, fit to print."""


class InputError(ReckonError):
    """Bad input from a user (CLI exit 2, HTTP 422)."""


class NotFoundError(ReckonError):
    """A named thing (estimate, factor set, run) does not exist (CLI exit 3, HTTP 404)."""


class NoDatabaseYet(NotFoundError):
    """A read found no database: nothing has been saved yet (and the read created none)."""


class ConflictError(ReckonError):
    """The request contradicts stored state (CLI exit 4, HTTP 409)."""


class UnavailableError(ReckonError):
    """A dependency (database, MLflow) cannot be reached or is not ready (exit 5, HTTP 503)."""


def fields_of(item: object) -> dict[str, Any]:
    """A dataclass's fields as a shallow dict (dataclasses.asdict deep-copies: 10x slower,
    and a reconcile pass converts thousands)."""
    return {field.name: getattr(item, field.name) for field in dataclasses.fields(item)}  # type: ignore[arg-type]


def require_positive(value: float, name: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{name} must be a positive finite number, got {value!r}")
    return value


def require_count(value: int, name: str) -> int:
    """A whole number from 1 to what an integer column holds (bounds.INT_MAX)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= bounds.INT_MAX:
        raise InputError(f"{name} must be a whole number from 1 to {bounds.INT_MAX}, got {value!r}")
    return value


def require_text(value: str, name: str, max_chars: int | None) -> str:
    """`value` when a text column of `max_chars` can hold it (no NUL byte, not too long)."""
    problem = bounds.text_problem(value, max_chars)
    if problem is not None:
        raise InputError(f"{name} {bounds.shown(value)} {problem}")
    return value


def require_fraction(value: float, name: str, *, allow_zero: bool, allow_one: bool) -> float:
    low_ok = value > 0 or (allow_zero and value == 0)
    high_ok = value < 1 or (allow_one and value == 1)
    if not math.isfinite(value) or not (low_ok and high_ok):
        low = "[0" if allow_zero else "(0"
        high = "1]" if allow_one else "1)"
        raise InputError(f"{name} must be in {low}, {high}, got {value!r}")
    return value


@dataclass(frozen=True)
class Model:
    """What is trained: N (active) parameters over D tokens; L, d, T make attention exact."""

    params: float
    tokens: float
    layers: int | None = None
    hidden_size: int | None = None
    seq_len: int | None = None

    def __post_init__(self) -> None:
        require_positive(self.params, "params")
        require_positive(self.tokens, "tokens")
        shape = (self.layers, self.hidden_size, self.seq_len)
        for name, value in zip(("layers", "hidden_size", "seq_len"), shape, strict=True):
            if value is not None:
                require_count(value, name)

    @property
    def has_shape(self) -> bool:
        return None not in (self.layers, self.hidden_size, self.seq_len)


@dataclass(frozen=True)
class Hardware:
    """Where it runs: GPU model (canonical catalog name), count and numeric precision."""

    gpu: str
    gpus: int
    precision: str

    def __post_init__(self) -> None:
        require_count(self.gpus, "gpus")


@dataclass(frozen=True)
class Factors:
    """The two efficiency factors: utilization u (hardware FLOPs / peak while computing) and
    overhead f (share of wall time not spent computing)."""

    utilization: float = DEFAULT_UTILIZATION
    overhead: float = DEFAULT_OVERHEAD

    def __post_init__(self) -> None:
        require_fraction(self.utilization, "utilization", allow_zero=False, allow_one=True)
        require_fraction(self.overhead, "overhead", allow_zero=True, allow_one=False)


@dataclass(frozen=True)
class EstimateRequest:
    """Everything an estimate depends on, validated on construction."""

    model: Model
    hardware: Hardware
    factors: Factors = field(default_factory=Factors)
    recompute: Recompute = "none"
    recompute_factor: float | None = None  # explicit hardware/model FLOPs ratio, overrides mode
    price_per_gpu_hour: float | None = None
    currency: str = "USD"  # of the price, and so of the cost (a label: no conversion)

    def __post_init__(self) -> None:
        if self.recompute not in RECOMPUTE_MODES:
            raise InputError(
                f"unknown recompute mode {self.recompute!r}; use one of "
                + ", ".join(RECOMPUTE_MODES)
            )
        if self.recompute_factor is not None and (
            not math.isfinite(self.recompute_factor) or self.recompute_factor < 1
        ):
            raise InputError(f"recompute factor must be at least 1, got {self.recompute_factor!r}")
        if not _CURRENCY.fullmatch(self.currency):
            raise InputError(f"currency must be a 3-letter code like USD, got {self.currency!r}")
        if self.price_per_gpu_hour is not None and (
            not math.isfinite(self.price_per_gpu_hour) or self.price_per_gpu_hour < 0
        ):
            raise InputError(
                f"price per GPU-hour must be zero or more, got {self.price_per_gpu_hour!r}"
            )


@dataclass(frozen=True)
class Estimate:
    """The answer: FLOPs, times and what follows from them. Seconds are wall-clock seconds."""

    request: EstimateRequest
    peak_flops: float  # dense FLOP/s of one GPU at the requested precision
    model_flops: float
    flops: float  # hardware FLOPs = model FLOPs x recompute factor
    recompute_factor: float
    compute_seconds: float
    wall_seconds: float
    gpu_hours: float
    mfu: float
    hfu: float
    tokens_per_second: float  # whole job, steady state (while computing)
    cost: float | None
    formula_version: str = FORMULA_VERSION


@dataclass(frozen=True)
class Interval:
    """A P10/P50/P90 range of wall seconds."""

    p10: float
    p50: float
    p90: float


@dataclass(frozen=True)
class SensitivityRow:
    variable: str
    value: str
    wall_seconds: float
    change_pct: float  # vs the base case; + means slower
    is_base: bool


@dataclass(frozen=True)
class Plan:
    """The inverse question's answer: the fewest GPUs that meet the deadline."""

    deadline_seconds: float
    gpus: int
    multiple_of: int
    estimate: Estimate


# --- observed runs (MLflow) ----------------------------------------------------------------

ESTIMATE_TAG = "reckon.estimate_id"  # the tag a training job sets to link its run
TERMINAL_STATUSES = ("FINISHED", "FAILED", "KILLED")


@dataclass(frozen=True)
class RunObservables:
    """What a logging profile (service/profiles) derived from one run's params, tags and
    metrics: whole-job totals and rates, None where the run does not say. `problem` is a
    (reason code, detail) pair when the run's metrics cannot be used (contradictory, no
    rate logged); the run's wall time is still good then."""

    profile: str | None
    tokens: float | None = None
    model_flops: float | None = None
    throughput: float | None = None  # whole-job tokens/s while computing (steady state)
    compute_seconds: float | None = None
    gpus: int | None = None
    gpu: str | None = None  # as the run names it (NVML style allowed); resolved later
    precision: str | None = None
    params: float | None = None
    recompute: Recompute | None = None
    problem: tuple[str, str] | None = None


@dataclass(frozen=True)
class ObservedRun:
    """One MLflow run as Reckon needs it. Times are aware UTC; `throughput` is whole-job
    tokens/s as the run's logging profile derives it (for Reckon's own profile, the latest
    value exactly as logged, possibly NaN or negative: judging it is the reconcile use
    case's job). `compute_seconds` is the run's own compute time when its profile gives one
    without a rate (HF's train_runtime). `observables` is everything the profile derived;
    it is not stored, only `profile` and `compute_seconds` are."""

    run_id: str
    experiment_id: str
    status: str  # MLflow status name: RUNNING, SCHEDULED, FINISHED, FAILED, KILLED
    started_at: datetime | None
    ended_at: datetime | None
    estimate_id: str | None  # value of the reckon.estimate_id tag, if set
    throughput: float | None
    profile: str | None = None
    compute_seconds: float | None = None
    observables: RunObservables | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ScanWindow:
    """Runs whose end time is in (after, cutoff], both aware UTC; `after` None = from the
    beginning of time (a --full rescan)."""

    after: datetime | None
    cutoff: datetime


# --- stored predictions --------------------------------------------------------------------

EstimateKind = Literal["computed", "external", "retrospective"]
FactorSource = Literal[
    "given", "default", "prior", "segment", "gpu", "precision", "all", "external"
]


@dataclass(frozen=True)
class SavedEstimate:
    """A stored, immutable prediction. `estimate` is the full computed answer for kind
    "computed"; an "external" one (a planner's own number) has only the wall seconds and the
    run configuration. A "retrospective" one is computed like "computed" but after the fact,
    from a past run's own configuration with the published prior, dated at the run's start
    (`reckon import`): it was never a forecast. `factor_set_version` None means no
    calibrated factor set was used."""

    id: str
    kind: EstimateKind
    created_at: datetime  # aware UTC
    gpu: str
    gpus: int
    precision: str
    predicted_wall_seconds: float
    estimate: Estimate | None = None
    interval: Interval | None = None
    factor_set_version: int | None = None
    factor_source: FactorSource = "given"
    label: str | None = None

    @property
    def mlflow_tag(self) -> str:
        return f"{ESTIMATE_TAG}={self.id}"

    @property
    def segment(self) -> str:
        return f"{self.gpu}/{self.precision}"


@dataclass(frozen=True)
class Planned:
    """What a reconciliation needs of a saved estimate, and nothing more: a pass judges
    thousands, and rebuilding each whole `SavedEstimate` cost more than the judging. The
    compute side (`tokens`, `flops`, `peak_flops`) is None for an external estimate."""

    id: str
    kind: EstimateKind
    gpu: str
    gpus: int
    precision: str
    predicted_wall_seconds: float
    recompute: str | None = None
    p10: float | None = None
    p90: float | None = None
    tokens: float | None = None
    flops: float | None = None
    peak_flops: float | None = None

    @classmethod
    def of(cls, saved: SavedEstimate) -> Planned:
        result, interval = saved.estimate, saved.interval
        return cls(
            id=saved.id,
            kind=saved.kind,
            gpu=saved.gpu,
            gpus=saved.gpus,
            precision=saved.precision,
            predicted_wall_seconds=saved.predicted_wall_seconds,
            recompute=None if result is None else result.request.recompute,
            p10=None if interval is None else interval.p10,
            p90=None if interval is None else interval.p90,
            tokens=None if result is None else result.request.model.tokens,
            flops=None if result is None else result.flops,
            peak_flops=None if result is None else result.peak_flops,
        )


# --- reconciliation ------------------------------------------------------------------------

FactorsKind = Literal["separate", "combined", "none"]


@dataclass(frozen=True)
class Skip:
    """Something a pass could not use, and why. `reason` is a stable code."""

    run_id: str
    reason: str
    detail: str
    estimate_id: str | None = None


@dataclass(frozen=True)
class Reconciliation:
    """Predicted against observed for one estimate. error_pct > 0: predicted too long."""

    estimate_id: str
    run_ids: tuple[str, ...]  # in start order
    gpu: str
    precision: str
    recompute: str | None
    started_at: datetime
    ended_at: datetime
    predicted_seconds: float
    predicted_seconds_p10: float | None
    predicted_seconds_p90: float | None
    observed_seconds: float
    observed_compute_seconds: float | None
    ratio: float  # observed / predicted
    error_pct: float
    abs_error_pct: float
    implied_utilization: float | None
    implied_overhead: float | None
    implied_effective_utilization: float | None  # u x (1 - f): needs only wall time
    factors_kind: FactorsKind
    failed_segments: int
    profile: str | None = None  # logging profile of the run the compute time came from
    note: str | None = None  # e.g. OVERHEAD_CLAMPED
    kind: EstimateKind = "computed"  # the estimate's: accuracy keeps retrospective apart

    @property
    def segment(self) -> str:
        return f"{self.gpu}/{self.precision}"


# The run's own compute time exceeded its wall time (HF's timer starts before the MLflow run
# exists): overhead is stored as 0, never negative.
OVERHEAD_CLAMPED = "overhead_clamped"


@dataclass(frozen=True)
class PassRecord:
    """One reconcile pass as stored: status is running, succeeded or failed."""

    id: int
    trigger: str
    started_at: datetime
    ended_at: datetime | None
    status: str
    window_after: datetime | None
    window_cutoff: datetime | None
    runs_seen: int
    reconciled: int
    skipped: int
    factor_set_version: int | None
    error: str | None


@dataclass(frozen=True)
class RunningProjection:
    """A linked run still RUNNING, projected from its throughput so far."""

    run_id: str
    estimate_id: str
    started_at: datetime
    elapsed_seconds: float
    predicted_seconds: float
    projected_seconds: float | None  # None without a usable throughput or a computed estimate
    slip_pct: float | None  # + = projected to take longer than predicted


@dataclass(frozen=True)
class SchemaStatus:
    """Where a database's schema stands against the code's migrations."""

    database: str  # the URL without its password
    current: str | None
    head: str

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


# what `accuracy --by` can group by ("segment_week": "h100-sxm/bf16 2026-W41")
ACCURACY_GROUPINGS = ("gpu_type", "precision", "segment", "month", "segment_week", "segment_month")
ACCURACY_ALIASES = {"gpu": "gpu_type"}  # `--gpu` names the GPU model everywhere else


@dataclass(frozen=True)
class PendingTags:
    """Tags the write-back still owes one MLflow run (an outbox entry)."""

    run_id: str
    estimate_id: str
    tags: dict[str, str]
