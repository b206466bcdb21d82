"""The records of the loop: observed runs, stored predictions, reconciliations, skips,
passes, running projections, schema status and owed tags. Frozen dataclasses only."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from service.domain.errors import InputError
from service.domain.forecast import Eta
from service.domain.money import RunCost
from service.domain.prices import Price
from service.domain.values import Estimate, Interval, Recompute

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
    global_batch_tokens: float | None = None  # tokens per optimizer step (tokens ÷ steps)


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
    # The configuration the run itself states (the plugin's tags, what its profile read, a
    # profiles-file default), never the plan `reckon launch` tagged it with; None: unsaid.
    gpus: int | None = None
    tokens: float | None = None
    precision: str | None = None
    global_batch_tokens: float | None = None  # tokens per optimizer step (its profile)


@dataclass(frozen=True)
class ScanWindow:
    """Runs whose end time is in (after, cutoff], both aware UTC; `after` None = from the
    beginning of time (a --full rescan)."""

    after: datetime | None
    cutoff: datetime
    # Only these experiment ids (a newly listed experiment's backfill); None: every one read.
    experiments: tuple[str, ...] | None = None


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
    deadline: datetime | None = None  # aware UTC: the run is at risk when its P90 is later

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
    params: float | None = None  # active parameters N of 6·N·D
    tokens: float | None = None
    flops: float | None = None
    peak_flops: float | None = None
    global_batch_tokens: float | None = None  # tokens per optimizer step, where planned

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
            params=None if result is None else result.request.model.params,
            tokens=None if result is None else result.request.model.tokens,
            flops=None if result is None else result.flops,
            peak_flops=None if result is None else result.peak_flops,
            global_batch_tokens=None
            if result is None
            else result.request.model.global_batch_tokens,
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


# How `reckon history` and GET /v1/history order their rows: newest or oldest run end first,
# or the largest or smallest miss (|error|) first.
HISTORY_SORTS = ("newest", "oldest", "worst", "best")
SEARCH_MAX_CHARS = 200


@dataclass(frozen=True)
class HistoryQuery:
    """Which reconciliations a history read returns: ended since, on one GPU, whose estimate
    id, label, run ids, GPU or precision contain `search` (case-insensitive), in `sort`
    order, `limit` of them after the first `offset`."""

    since: datetime | None = None
    gpu: str | None = None
    search: str | None = None
    sort: str = "newest"
    precision: str | None = None  # with `gpu`: one segment
    limit: int | None = None
    offset: int = 0
    experiments: bool = False  # also read each row's MLflow experiment (experiment_id)

    def __post_init__(self) -> None:
        if self.sort not in HISTORY_SORTS:
            raise InputError(
                f"cannot sort history by {self.sort!r}; use one of {', '.join(HISTORY_SORTS)}"
            )
        if self.offset < 0:
            raise InputError(f"offset must be 0 or more, not {self.offset}")
        if self.search is not None and len(self.search) > SEARCH_MAX_CHARS:
            raise InputError(f"search text longer than {SEARCH_MAX_CHARS} characters")


@dataclass(frozen=True)
class HistoryPage:
    """One page of the history: its rows, how many match the query in all, the query."""

    rows: list[Reconciliation]
    total: int
    query: HistoryQuery


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
    # Planned against observed configuration (service.domain.configuration): the factors
    # are implied at the observed values (the plan's where the run said nothing), `precision`
    # above is the one they were implied at, and the error stays against the plan.
    config_check: str | None = None  # CONFIG_DIFFERS, CONFIG_FROM_PLAN or None (they agree)
    params: float | None = None  # the estimate's active parameters (a covariate of the refit)
    global_batch_tokens: float | None = None  # the estimate's tokens per step (the same)
    planned_gpus: int | None = None
    planned_tokens: float | None = None
    planned_precision: str | None = None
    observed_gpus: int | None = None
    observed_tokens: float | None = None
    observed_precision: str | None = None
    # Tokens per optimizer step as the run's profile derived them (the refit prefers them
    # to the estimate's `global_batch_tokens`).
    observed_global_batch_tokens: float | None = None
    # The estimate's label, as the planner saved it: read with the history (from the
    # estimate), never stored with the reconciliation.
    label: str | None = None
    # The estimate's own price (`--price-per-gpu-hour`, in its currency), read with the
    # history as the label is; planned and observed cost (service.domain.money), computed
    # when the history is read, with the prices file. Neither is stored here.
    price: Price | None = None
    cost: RunCost | None = None
    # The MLflow experiment of its first run, read with the history when the query asks
    # (HistoryQuery.experiments: the spend's grouping), else None.
    experiment_id: str | None = None

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
    # P10/P50/P90 finish, deadline and at-risk (service.domain.forecast); None without a
    # projection.
    eta: Eta | None = None


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


@dataclass(frozen=True)
class TagsOwed:
    """The write-back outbox at a glance: entries still owed, how many of them MLflow last
    refused for want of permission (401/403: kept, retried every pass) and its reason."""

    pending: int = 0
    blocked: int = 0
    blocked_reason: str | None = None
