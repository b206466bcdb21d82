"""ORM rows (SQLAlchemy 2 typed declarative). The schema itself is owned by Alembic
(migrations/); a test fails when these models and the migrations differ."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from service.adapters.db.columns import UtcDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class EstimateRow(Base):
    """A prediction, immutable once written. Computed ones carry every input and output;
    external ones (a planner's own number) carry the wall seconds and the run config."""

    __tablename__ = "estimate"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # computed, external, retrospective
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    label: Mapped[str | None] = mapped_column(String(200))
    gpu: Mapped[str] = mapped_column(String(64))
    gpus: Mapped[int] = mapped_column(Integer)
    precision: Mapped[str] = mapped_column(String(16))
    params: Mapped[float | None] = mapped_column(Double)
    tokens: Mapped[float | None] = mapped_column(Double)
    layers: Mapped[int | None] = mapped_column(Integer)
    hidden_size: Mapped[int | None] = mapped_column(Integer)
    seq_len: Mapped[int | None] = mapped_column(Integer)
    global_batch_tokens: Mapped[float | None] = mapped_column(Double)  # tokens per step (0017)
    recompute: Mapped[str | None] = mapped_column(String(16))
    recompute_factor_given: Mapped[float | None] = mapped_column(Double)
    recompute_factor: Mapped[float | None] = mapped_column(Double)
    utilization: Mapped[float | None] = mapped_column(Double)
    overhead: Mapped[float | None] = mapped_column(Double)
    price_per_gpu_hour: Mapped[float | None] = mapped_column(Double)
    currency: Mapped[str | None] = mapped_column(String(3))
    peak_flops: Mapped[float | None] = mapped_column(Double)
    model_flops: Mapped[float | None] = mapped_column(Double)
    flops: Mapped[float | None] = mapped_column(Double)
    predicted_compute_seconds: Mapped[float | None] = mapped_column(Double)
    predicted_wall_seconds: Mapped[float] = mapped_column(Double)
    wall_seconds_p10: Mapped[float | None] = mapped_column(Double)
    wall_seconds_p50: Mapped[float | None] = mapped_column(Double)
    wall_seconds_p90: Mapped[float | None] = mapped_column(Double)
    deadline: Mapped[datetime | None] = mapped_column(UtcDateTime())  # (0018)
    gpu_hours: Mapped[float | None] = mapped_column(Double)
    mfu: Mapped[float | None] = mapped_column(Double)
    hfu: Mapped[float | None] = mapped_column(Double)
    tokens_per_second: Mapped[float | None] = mapped_column(Double)
    cost: Mapped[float | None] = mapped_column(Double)
    formula_version: Mapped[str | None] = mapped_column(String(32))
    factor_set_version: Mapped[int | None] = mapped_column(ForeignKey("factor_set.version"))
    factor_source: Mapped[str] = mapped_column(String(16))

    __table_args__ = (Index("ix_estimate_created_at", "created_at"),)


class RunLinkRow(Base):
    """Which MLflow run belongs to which estimate. A run belongs to one estimate at most."""

    __tablename__ = "run_link"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    estimate_id: Mapped[str] = mapped_column(ForeignKey("estimate.id"), index=True)
    run_id: Mapped[str] = mapped_column(String(64), unique=True)
    source: Mapped[str] = mapped_column(String(16))  # "tag" or "manual"
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class LinkChangeRow(Base):
    """One row per link, unlink or import made outside a pass: the largest id is the links'
    version (a pass compares it at its start and end, in O(1)), and an unlink's row tells
    the pass's final judgment that a tag it read before the unlink no longer counts. A pass
    deletes all but the newest row as it opens (the newest keeps the ids increasing)."""

    __tablename__ = "link_change"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    change: Mapped[str] = mapped_column(String(16))  # "link", "unlink" or "import"
    run_id: Mapped[str | None] = mapped_column(String(64))  # None: an import (many runs)
    changed_at: Mapped[datetime] = mapped_column(UtcDateTime())


class MlflowRunRow(Base):
    """The latest copy of an MLflow run a pass has seen (natural key: the run id)."""

    __tablename__ = "mlflow_run"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    experiment_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), index=True)
    estimate_tag: Mapped[str | None] = mapped_column(String(64))
    throughput: Mapped[float | None] = mapped_column(Double)
    profile: Mapped[str | None] = mapped_column(String(64))  # logging profile detected
    compute_seconds: Mapped[float | None] = mapped_column(Double)  # from the profile
    # What the run states about its configuration (0010): not the plan it was tagged with.
    observed_gpus: Mapped[int | None] = mapped_column(Integer)
    observed_tokens: Mapped[float | None] = mapped_column(Double)
    observed_precision: Mapped[str | None] = mapped_column(String(16))
    observed_global_batch_tokens: Mapped[float | None] = mapped_column(Double)  # (0020)
    seen_at: Mapped[datetime] = mapped_column(UtcDateTime())
    pass_id: Mapped[int | None] = mapped_column(Integer)  # the pass that wrote it (no FK: 0009)


class _ReconciliationColumns:
    """The columns of a reconciliation's values (the domain fields, run ids joined), shared
    by the stored row and the pass's staged copy of it."""

    run_ids: Mapped[str] = mapped_column(Text)  # comma-separated, in start order
    gpu: Mapped[str] = mapped_column(String(64))
    precision: Mapped[str] = mapped_column(String(16))
    recompute: Mapped[str | None] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UtcDateTime())
    ended_at: Mapped[datetime] = mapped_column(UtcDateTime())
    predicted_seconds: Mapped[float] = mapped_column(Double)
    predicted_seconds_p10: Mapped[float | None] = mapped_column(Double)
    predicted_seconds_p90: Mapped[float | None] = mapped_column(Double)
    observed_seconds: Mapped[float] = mapped_column(Double)
    observed_compute_seconds: Mapped[float | None] = mapped_column(Double)
    ratio: Mapped[float] = mapped_column(Double)  # observed / predicted
    error_pct: Mapped[float] = mapped_column(Double)  # + = predicted too long
    abs_error_pct: Mapped[float] = mapped_column(Double)
    implied_utilization: Mapped[float | None] = mapped_column(Double)
    implied_overhead: Mapped[float | None] = mapped_column(Double)
    implied_effective_utilization: Mapped[float | None] = mapped_column(Double)
    factors_kind: Mapped[str] = mapped_column(String(16))  # "separate", "combined", "none"
    failed_segments: Mapped[int] = mapped_column(Integer)
    profile: Mapped[str | None] = mapped_column(String(64))  # where compute time came from
    note: Mapped[str | None] = mapped_column(String(32))  # e.g. overhead_clamped
    kind: Mapped[str] = mapped_column(String(16), server_default="computed")  # the estimate's
    # Planned against observed configuration (0010); precision above is the one used.
    config_check: Mapped[str | None] = mapped_column(String(16))
    params: Mapped[float | None] = mapped_column(Double)  # the estimate's, for the refit
    global_batch_tokens: Mapped[float | None] = mapped_column(Double)  # the same (0017)
    planned_gpus: Mapped[int | None] = mapped_column(Integer)
    planned_tokens: Mapped[float | None] = mapped_column(Double)
    planned_precision: Mapped[str | None] = mapped_column(String(16))
    observed_gpus: Mapped[int | None] = mapped_column(Integer)
    observed_tokens: Mapped[float | None] = mapped_column(Double)
    observed_precision: Mapped[str | None] = mapped_column(String(16))
    observed_global_batch_tokens: Mapped[float | None] = mapped_column(Double)  # (0020)


class ReconciliationRow(_ReconciliationColumns, Base):
    """Predicted against observed for one estimate (natural key: the estimate)."""

    __tablename__ = "reconciliation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    estimate_id: Mapped[str] = mapped_column(ForeignKey("estimate.id"), unique=True)
    ended_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
    # The pass that wrote it (no FK: 0009); indexed for the refit's read of a pass's rows.
    pass_id: Mapped[int | None] = mapped_column(Integer, index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class SkippedRunRow(Base):
    """A run a pass could not use, and why (natural key: run and reason)."""

    __tablename__ = "skipped_run"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(String(32))
    detail: Mapped[str] = mapped_column(Text)
    estimate_id: Mapped[str | None] = mapped_column(String(32))
    pass_id: Mapped[int | None] = mapped_column(ForeignKey("reconcile_pass.id"))
    seen_at: Mapped[datetime] = mapped_column(UtcDateTime())

    __table_args__ = (UniqueConstraint("run_id", "reason"),)


class ReconcilePassRow(Base):
    """One reconcile pass: when, how it ended, what it counted."""

    __tablename__ = "reconcile_pass"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    trigger: Mapped[str] = mapped_column(String(16))  # cli, scheduler, api
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    status: Mapped[str] = mapped_column(String(16))  # running, succeeded, failed
    window_after: Mapped[datetime | None] = mapped_column(UtcDateTime())
    window_cutoff: Mapped[datetime | None] = mapped_column(UtcDateTime())
    runs_seen: Mapped[int] = mapped_column(Integer, default=0)
    reconciled: Mapped[int] = mapped_column(Integer, default=0)
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    factor_set_version: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)


class SyncStateRow(Base):
    """The high-water mark of a source, moved in the same transaction as the rows it covers."""

    __tablename__ = "sync_state"

    source: Mapped[str] = mapped_column(String(32), primary_key=True)
    high_water_mark: Mapped[datetime | None] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    pass_id: Mapped[int | None] = mapped_column(ForeignKey("reconcile_pass.id"))


class ScannedExperimentRow(Base):
    """An MLflow experiment some pass has read from its beginning (or that was listed when
    this table came): one newly listed is backfilled once, by the next pass, then recorded."""

    __tablename__ = "scanned_experiment"

    experiment_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    pass_id: Mapped[int] = mapped_column(Integer)  # no FK, as the staging tables (0009)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime())


class PassClaimRow(Base):
    """A claim row that keeps passes exclusive where advisory locks do not exist (SQLite);
    the unique key is the lock, `expires_at` frees it after a crash."""

    __tablename__ = "pass_claim"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    claimed_at: Mapped[datetime] = mapped_column(UtcDateTime())
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())


class FactorSetRow(Base):
    """An immutable, numbered result of a refit, with its provenance and backtest scores."""

    __tablename__ = "factor_set"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    version: Mapped[int] = mapped_column(Integer, unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    activated_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    method: Mapped[str] = mapped_column(String(64))
    parameters: Mapped[str] = mapped_column(Text)  # JSON
    provenance: Mapped[str] = mapped_column(Text)  # JSON: which reconciliations, when
    reconciliation_count: Mapped[int] = mapped_column(Integer)
    backtest_score: Mapped[float | None] = mapped_column(Double)
    baseline_score: Mapped[float | None] = mapped_column(Double)
    forced: Mapped[bool] = mapped_column(Boolean, default=False)


class SegmentFactorRow(Base):
    """The fitted factors of one segment (gpu/precision, gpu/*, */*) in one factor set."""

    __tablename__ = "segment_factor"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    factor_set_id: Mapped[int] = mapped_column(ForeignKey("factor_set.id"))
    segment: Mapped[str] = mapped_column(String(96))
    level: Mapped[str] = mapped_column(String(16))  # segment, gpu, all, prior
    utilization: Mapped[float] = mapped_column(Double)
    utilization_p10: Mapped[float] = mapped_column(Double)
    utilization_p90: Mapped[float] = mapped_column(Double)
    overhead: Mapped[float] = mapped_column(Double)
    overhead_p10: Mapped[float] = mapped_column(Double)
    overhead_p90: Mapped[float] = mapped_column(Double)
    log_sigma: Mapped[float] = mapped_column(Double)  # spread of log(observed/predicted)
    n: Mapped[int] = mapped_column(Integer)
    n_throughput: Mapped[int] = mapped_column(Integer)
    combined_only: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # Calibrated σ of log wall below/above the median (split lognormal); a fallback segment
    # backtested worse calibrated than raw, so estimates use the raw factors.
    log_sigma_low: Mapped[float] = mapped_column(Double)
    log_sigma_high: Mapped[float] = mapped_column(Double)
    fallback: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # The fallback is the hand baseline, stored as the factors (0016; calibration.by_hand).
    by_hand: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # Scale slopes and the ranges of the runs fitted on (0011; service.calibration.scaling).
    gpus_slope: Mapped[float] = mapped_column(Double, server_default="0")
    gpus_slope_se: Mapped[float] = mapped_column(Double, server_default="0")
    log_gpus_reference: Mapped[float] = mapped_column(Double, server_default="0")
    params_slope: Mapped[float] = mapped_column(Double, server_default="0")
    params_slope_se: Mapped[float] = mapped_column(Double, server_default="0")
    log_params_reference: Mapped[float] = mapped_column(Double, server_default="0")
    # Model-size curvature and its fitted range, failures (0015; service.calibration.scaling).
    params_curvature: Mapped[float] = mapped_column(Double, server_default="0")
    params_curvature_se: Mapped[float] = mapped_column(Double, server_default="0")
    log_params_low: Mapped[float] = mapped_column(Double, server_default="0")
    log_params_high: Mapped[float] = mapped_column(Double, server_default="0")
    failure_rate: Mapped[float] = mapped_column(Double, server_default="0")
    failure_cost_hours: Mapped[float] = mapped_column(Double, server_default="0")
    failure_cost_se: Mapped[float] = mapped_column(Double, server_default="0")
    # Slope on log tokens per GPU per optimizer step (0017; service.calibration.scaling).
    batch_slope: Mapped[float] = mapped_column(Double, server_default="0")
    batch_slope_se: Mapped[float] = mapped_column(Double, server_default="0")
    log_batch_reference: Mapped[float] = mapped_column(Double, server_default="0")
    # GPU-count curvature and the log GPU counts fitted on (0019; calibration.scaling).
    gpus_curvature: Mapped[float] = mapped_column(Double, server_default="0")
    gpus_curvature_se: Mapped[float] = mapped_column(Double, server_default="0")
    log_gpus_low: Mapped[float] = mapped_column(Double, server_default="0")
    log_gpus_high: Mapped[float] = mapped_column(Double, server_default="0")
    gpus_min: Mapped[float | None] = mapped_column(Double)
    gpus_max: Mapped[float | None] = mapped_column(Double)
    params_min: Mapped[float | None] = mapped_column(Double)
    params_max: Mapped[float | None] = mapped_column(Double)
    tokens_min: Mapped[float | None] = mapped_column(Double)
    tokens_max: Mapped[float | None] = mapped_column(Double)

    __table_args__ = (UniqueConstraint("factor_set_id", "segment"),)


class StagedRunRow(Base):
    """Runs a pass has read from MLflow but not yet applied. Written page by page so memory
    stays flat; applied, with the watermark, in the pass's one final transaction; cleared
    when a pass fails, and by the next pass as it opens (so the last pass's rows stay until
    then; nothing reads them)."""

    __tablename__ = "staged_run"

    pass_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # no FK (0009)
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    experiment_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    estimate_tag: Mapped[str | None] = mapped_column(String(64))
    throughput: Mapped[float | None] = mapped_column(Double)
    profile: Mapped[str | None] = mapped_column(String(64))
    compute_seconds: Mapped[float | None] = mapped_column(Double)
    observed_gpus: Mapped[int | None] = mapped_column(Integer)
    observed_tokens: Mapped[float | None] = mapped_column(Double)
    observed_precision: Mapped[str | None] = mapped_column(String(16))
    observed_global_batch_tokens: Mapped[float | None] = mapped_column(Double)  # (0020)
    # The estimate the pass resolved the run to (its link, else its tag when the estimate
    # exists): the final transaction turns the new ones into tag links in one statement.
    owner: Mapped[str | None] = mapped_column(String(32))


class StagedReconciliationRow(_ReconciliationColumns, Base):
    """A reconciliation a pass has judged page by page but not yet applied: the final
    transaction copies a pass's rows into `reconciliation` in one statement. Only changed
    ones are staged (a rerun stages none)."""

    __tablename__ = "staged_reconciliation"

    pass_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # no FK (0009)
    estimate_id: Mapped[str] = mapped_column(String(32), primary_key=True)


class TagOutboxRow(Base):
    """Tags still to be written on an MLflow run (the write-back outbox): stored in the
    same transaction as the reconciliation they report, deleted once MLflow accepts them,
    so an outage or a kill between the commit and the write-back loses no tag."""

    __tablename__ = "tag_outbox"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    estimate_id: Mapped[str] = mapped_column(ForeignKey("estimate.id"))
    tags: Mapped[str] = mapped_column(Text)  # JSON object of tag name to value
    pass_id: Mapped[int | None] = mapped_column(ForeignKey("reconcile_pass.id"))
    queued_at: Mapped[datetime] = mapped_column(UtcDateTime())
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    # MLflow's last answer was 401/403 (0012): kept and retried, counted as blocked.
    blocked: Mapped[bool] = mapped_column(Boolean, server_default=false())


class ObservationSnapshotRow(Base):
    """The refit's early read as the last pass left it (0022; one row, id 1): a cache, see
    service.adapters.db.observation_snapshot."""

    __tablename__ = "observation_snapshot"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    through_pass_id: Mapped[int] = mapped_column(Integer)  # every pass up to it, none after
    links_version: Mapped[int] = mapped_column(Integer)
    stored_at: Mapped[datetime] = mapped_column(UtcDateTime())
    payload: Mapped[bytes] = mapped_column(LargeBinary)
