"""Every outcome type of the use cases (frozen dataclasses): what the application object
returns and the presenters turn into text, JSON, the report and metrics. No I/O, and no
import of numpy at run time (the planning commands read these types too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from service.domain.records import (
    FactorSource,
    PassRecord,
    Reconciliation,
    RunningProjection,
    SavedEstimate,
    ScanWindow,
    Skip,
)
from service.domain.values import Estimate, Plan, SensitivityRow

if TYPE_CHECKING:
    from service.calibration.calibrated import Calibrated
    from service.calibration.calibrated_plans import CalibratedPlan, CalibratedSensitivityRow
    from service.calibration.model import BacktestResult, FactorSet, SegmentFactors


@dataclass(frozen=True)
class Answer:
    """An estimate and where its factors came from; `calibrated` is set when fitted factors
    (and so a P10/P50/P90) were asked for."""

    estimate: Estimate
    factor_source: FactorSource
    calibrated: Calibrated | None = None


@dataclass(frozen=True)
class SavedAnswer:
    answer: Answer
    saved: SavedEstimate


@dataclass(frozen=True)
class Sensitivity:
    """The table; `calibrated` rows (with P10/P90) when fitted factors were asked for."""

    base: Estimate
    rows: list[SensitivityRow]
    calibrated: list[CalibratedSensitivityRow] | None = None
    factor_set: int | None = None


@dataclass(frozen=True)
class PlanAnswer:
    """The plan; `calibrated` holds the quantile it was made at and its P10/P90 when fitted
    factors were asked for (then `plan.estimate` is the P50 at the chosen count)."""

    plan: Plan
    calibrated: CalibratedPlan | None = None
    factor_set: int | None = None


@dataclass(frozen=True)
class Unlinked:
    """What `unlink` did: the MLflow tag removed or not, and the estimate's reconciliation
    recomputed from its remaining runs (None: none of them has finished)."""

    estimate_id: str
    run_id: str
    tag_removed: bool
    reconciliation: Reconciliation | None


@dataclass(frozen=True)
class EstimateDetail:
    saved: SavedEstimate
    run_ids: list[str]


@dataclass(frozen=True)
class FactorsAnswer:
    """The chosen factor set (None: none yet, the published prior is in use)."""

    factor_set: FactorSet | None
    active_version: int | None
    prior_segments: list[SegmentFactors]
    prior_sources: list[str]

    @property
    def active(self) -> bool:
        return self.factor_set is not None and self.factor_set.version == self.active_version


@dataclass(frozen=True)
class FactorHistory:
    sets: list[FactorSet]
    active_version: int | None


@dataclass(frozen=True)
class Jobs:
    schedule: str
    timezone: str
    passes: list[PassRecord]


@dataclass(frozen=True)
class Health:
    """'ok' or the one-line reason, for each dependency."""

    database: str
    mlflow: str

    @property
    def ready(self) -> bool:
        return self.database == "ok"


@dataclass(frozen=True)
class ReportData:
    history: list[Reconciliation]
    accuracy: Accuracy | None  # None: nothing to score (the report says so)
    factor_history: FactorHistory
    running: list[RunningProjection]
    running_error: str | None
    generated_at: datetime


@dataclass(frozen=True)
class Snapshot:
    """What /metrics exposes, read in one transaction."""

    last_pass: PassRecord | None
    last_success: PassRecord | None
    reconciliations: int
    skips: int
    median_abs_error_pct: float | None  # over the most recent reconciliations
    median_window: int  # how many: RECENT_FOR_MEDIAN
    tags_pending: int  # result tags MLflow has not accepted yet (the write-back outbox)
    # The active factor set's time-ordered backtest (None before any set): median absolute
    # % error of raw and of calibrated predictions on the same targets, calibrated P10-P90
    # coverage, and how many targets.
    backtest_raw_pct: float | None = None
    backtest_calibrated_pct: float | None = None
    backtest_coverage: float | None = None
    backtest_targets: int | None = None


@dataclass(frozen=True)
class Scores:
    """n; median and mean absolute % error; bias = exp(mean log(predicted/observed)) − 1 in
    % (> 0: predictions too long) and the mean log ratio itself; coverage = share of
    observations inside P10–P90 (None when no prediction had a range)."""

    n: int
    median_ape: float | None
    mape: float | None
    bias: float | None
    bias_log: float | None
    coverage: float | None


@dataclass(frozen=True)
class ScorePair:
    """Raw and calibrated scores of the same predictions; `calibrated_worse`: calibrated's
    median absolute error is the higher one."""

    raw: Scores
    calibrated: Scores
    calibrated_worse: bool


@dataclass(frozen=True)
class NotFallenBack:
    """Why a segment whose calibrated predictions look worse has not fallen back: the gate's
    evidence on it (basis "own" or "all" targets, how many, the median absolute errors as
    fractions, the share of resamples in which calibrated is worse, whether that is beyond
    noise: None when too few to judge) and the gate's thresholds."""

    basis: str
    n: int
    calibrated: float | None
    raw: float | None
    worse: bool | None
    worse_share: float | None
    looks_worse: bool
    min_targets: int
    confidence: float


@dataclass(frozen=True)
class AccuracyGroup:
    group: str
    scores: ScorePair
    fallback: bool | None  # None: the grouping is not by GPU or segment
    not_fallen_back: NotFallenBack | None = None


@dataclass(frozen=True)
class Accuracy:
    """`reckon accuracy`: forecasts overall and per group; imported (retrospective) runs
    scored apart."""

    by: str | None
    since: datetime | None
    overall: ScorePair
    groups: tuple[AccuracyGroup, ...]
    retrospective: ScorePair


PassStatus = Literal["succeeded", "failed", "locked"]


MISSED_PROBE_SPAN = timedelta(days=30)


@dataclass(frozen=True)
class PassOutcome:
    status: PassStatus
    pass_id: int | None = None
    window: ScanWindow | None = None
    runs_seen: int = 0
    reconciled: list[Reconciliation] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    factor_set: int | None = None
    error: str | None = None
    tags_written: int = 0
    tags_pending: int = 0  # write-back still owed (MLflow refused or was down); retried
    # Linked runs that ended before this pass's window yet were never seen by any pass
    # (they reached MLflow later than the lookback allows); `missed_hint` says what to run.
    missed_before_window: int = 0
    holder: str | None = None  # for "locked": who holds the lock, when known

    @property
    def locked(self) -> bool:
        """Another pass held the lock, so this one did nothing: a conflict (CLI exit 4)."""
        return self.status == "locked"

    @property
    def summary(self) -> str:
        if self.locked:
            held = f" (held by {self.holder})" if self.holder else ""
            return f"locked: another reconcile pass is running{held}; this one did nothing"
        line = (
            f"pass {self.pass_id} {self.status}: {self.runs_seen} runs seen, "
            f"{len(self.reconciled)} reconciled, {len(self.skipped)} skipped"
        )
        if self.tags_pending:
            line += f", {self.tags_pending} tags pending"
        if self.missed_before_window:
            line += f"; {self.missed_hint}"
        return line + (f" ({self.error})" if self.error else "")

    @property
    def missed_hint(self) -> str | None:
        if not self.missed_before_window or self.window is None or self.window.after is None:
            return None
        since = (self.window.after - MISSED_PROBE_SPAN).date().isoformat()
        return (
            f"{self.missed_before_window} linked runs ended before this pass's window and "
            f"were never seen: run `reckon reconcile --since {since}`"
        )


@dataclass(frozen=True)
class ImportSkip:
    run_id: str
    reason: str
    detail: str


@dataclass(frozen=True)
class ImportedRun:
    run_id: str
    estimate_id: str | None  # None on a dry run
    profile: str | None
    gpu: str
    gpus: int
    precision: str
    predicted_seconds: float


@dataclass(frozen=True)
class ImportOutcome:
    """JSON: runs_seen, imported, skipped (run_id, reason, detail); `reconciled` counts the
    imported estimates the pass reconciled."""

    runs_seen: int
    imported: tuple[ImportedRun, ...]
    skipped: tuple[ImportSkip, ...]
    dry_run: bool
    reconciled: int = 0
    pass_status: str | None = None  # succeeded, or locked: the next pass reconciles them
    pass_id: int | None = None
    factor_set: int | None = None
    estimate_ids: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class LaunchOutcome:
    exit_code: int  # CMD's own code; 128 + N when a signal N ended it (shell convention)
    status: str  # what the run(s) were ended as: FINISHED, FAILED or KILLED
    run_id: str  # the run launch created
    experiment_id: str
    experiment_name: str
    child_run_ids: tuple[str, ...]  # other runs the command started for this estimate
    deleted_pre_created: bool  # the created run was empty and the command logged elsewhere


@dataclass(frozen=True)
class RefitOutcome:
    factor_set: FactorSet | None  # None: nothing to fit, or nothing new since the active set
    activated: bool
    candidate: BacktestResult | None
    baseline: BacktestResult | None
    message: str
