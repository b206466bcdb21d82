"""What the loop's use cases answer: a reconcile pass, an import, a launch, a refit, the
recent passes and the metrics snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from service.domain.records import (
    PassRecord,
    Reconciliation,
    RunningProjection,
    ScanWindow,
    Skip,
    TagsOwed,
)
from service.domain.units import counted

if TYPE_CHECKING:
    from service.calibration.model import BacktestResult, FactorSet


@dataclass(frozen=True)
class Jobs:
    schedule: str
    timezone: str
    passes: list[PassRecord]
    tags: TagsOwed = field(default_factory=TagsOwed)  # the write-back outbox now


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
    tags_blocked: int  # of those, refused for want of permission (401/403)
    # The active factor set's time-ordered backtest (None before any set): median absolute
    # % error of raw and of calibrated predictions on the same targets, calibrated P10-P90
    # coverage, and how many targets.
    backtest_raw_pct: float | None = None
    backtest_calibrated_pct: float | None = None
    backtest_coverage: float | None = None
    backtest_targets: int | None = None
    # Linked runs RUNNING now, forecast at scrape time (service.usecases.forecast); None
    # when MLflow could not be read (no per-run series then, rather than stale ones).
    running: tuple[RunningProjection, ...] | None = None


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
    # Experiments newly listed in RECKON_EXPERIMENTS, read from their beginning by this pass.
    backfilled_experiments: list[str] = field(default_factory=list)
    tags_written: int = 0
    tags_pending: int = 0  # write-back still owed (MLflow refused or was down); retried
    tags_blocked: int = 0  # of those, refused for want of permission (401/403)
    blocked_reason: str | None = None  # MLflow's refusal, naming the permission needed
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
            f"pass {self.pass_id} {self.status}: {counted(self.runs_seen, 'run')} seen, "
            f"{len(self.reconciled):,} reconciled, {len(self.skipped):,} skipped"
        )
        if self.backfilled_experiments:
            listed = counted(len(self.backfilled_experiments), "newly listed experiment")
            line += f", {listed} backfilled"
        if self.tags_pending:
            line += f", {counted(self.tags_pending, 'tag')} pending"
        if self.tags_blocked:
            line += f" ({self.tags_blocked:,} blocked: MLflow denies EDIT permission)"
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


@dataclass(frozen=True)
class ForecastRun:
    """What one forecast run did: the runs forecast (those with a projection are tagged),
    the tags written now, what the outbox still owes, or `locked` with who holds it."""

    forecasts: list[RunningProjection]
    written: int = 0
    owed: TagsOwed = field(default_factory=TagsOwed)
    locked: bool = False
    holder: str | None = None

    @property
    def tagged(self) -> list[RunningProjection]:
        return [item for item in self.forecasts if item.eta is not None]

    @property
    def at_risk(self) -> list[RunningProjection]:
        return [item for item in self.tagged if item.eta is not None and item.eta.at_risk]
