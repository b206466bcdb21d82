"""Initial schema: estimates, run links, MLflow runs, reconciliations, skips, passes,
the watermark, the pass claim, factor sets and their segment factors.

Revision ID: 0001
Revises:
Create Date: 2026-11-30 01:59:22.630857
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "factor_set",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("activated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("method", sa.String(length=64), nullable=False),
        sa.Column("parameters", sa.Text(), nullable=False),
        sa.Column("provenance", sa.Text(), nullable=False),
        sa.Column("reconciliation_count", sa.Integer(), nullable=False),
        sa.Column("backtest_score", sa.Double(), nullable=True),
        sa.Column("baseline_score", sa.Double(), nullable=True),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_factor_set")),
        sa.UniqueConstraint("version", name=op.f("uq_factor_set_version")),
    )
    op.create_table(
        "pass_claim",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_pass_claim")),
    )
    op.create_table(
        "reconcile_pass",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("window_after", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_cutoff", sa.DateTime(timezone=True), nullable=True),
        sa.Column("runs_seen", sa.Integer(), nullable=False),
        sa.Column("reconciled", sa.Integer(), nullable=False),
        sa.Column("skipped", sa.Integer(), nullable=False),
        sa.Column("factor_set_version", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reconcile_pass")),
    )
    with op.batch_alter_table("reconcile_pass", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_reconcile_pass_started_at"), ["started_at"], unique=False
        )

    op.create_table(
        "estimate",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("gpu", sa.String(length=64), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("precision", sa.String(length=16), nullable=False),
        sa.Column("params", sa.Double(), nullable=True),
        sa.Column("tokens", sa.Double(), nullable=True),
        sa.Column("layers", sa.Integer(), nullable=True),
        sa.Column("hidden_size", sa.Integer(), nullable=True),
        sa.Column("seq_len", sa.Integer(), nullable=True),
        sa.Column("recompute", sa.String(length=16), nullable=True),
        sa.Column("recompute_factor_given", sa.Double(), nullable=True),
        sa.Column("recompute_factor", sa.Double(), nullable=True),
        sa.Column("utilization", sa.Double(), nullable=True),
        sa.Column("overhead", sa.Double(), nullable=True),
        sa.Column("price_per_gpu_hour", sa.Double(), nullable=True),
        sa.Column("peak_flops", sa.Double(), nullable=True),
        sa.Column("model_flops", sa.Double(), nullable=True),
        sa.Column("flops", sa.Double(), nullable=True),
        sa.Column("predicted_compute_seconds", sa.Double(), nullable=True),
        sa.Column("predicted_wall_seconds", sa.Double(), nullable=False),
        sa.Column("wall_seconds_p10", sa.Double(), nullable=True),
        sa.Column("wall_seconds_p50", sa.Double(), nullable=True),
        sa.Column("wall_seconds_p90", sa.Double(), nullable=True),
        sa.Column("gpu_hours", sa.Double(), nullable=True),
        sa.Column("mfu", sa.Double(), nullable=True),
        sa.Column("hfu", sa.Double(), nullable=True),
        sa.Column("tokens_per_second", sa.Double(), nullable=True),
        sa.Column("cost", sa.Double(), nullable=True),
        sa.Column("formula_version", sa.String(length=32), nullable=True),
        sa.Column("factor_set_version", sa.Integer(), nullable=True),
        sa.Column("factor_source", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["factor_set_version"],
            ["factor_set.version"],
            name=op.f("fk_estimate_factor_set_version_factor_set"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_estimate")),
    )
    with op.batch_alter_table("estimate", schema=None) as batch_op:
        batch_op.create_index("ix_estimate_created_at", ["created_at"], unique=False)

    op.create_table(
        "mlflow_run",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("experiment_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("estimate_tag", sa.String(length=64), nullable=True),
        sa.Column("throughput", sa.Double(), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pass_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["pass_id"], ["reconcile_pass.id"], name=op.f("fk_mlflow_run_pass_id_reconcile_pass")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_mlflow_run")),
    )
    with op.batch_alter_table("mlflow_run", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_mlflow_run_ended_at"), ["ended_at"], unique=False)

    op.create_table(
        "segment_factor",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("factor_set_id", sa.Integer(), nullable=False),
        sa.Column("segment", sa.String(length=96), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("utilization", sa.Double(), nullable=False),
        sa.Column("utilization_p10", sa.Double(), nullable=False),
        sa.Column("utilization_p90", sa.Double(), nullable=False),
        sa.Column("overhead", sa.Double(), nullable=False),
        sa.Column("overhead_p10", sa.Double(), nullable=False),
        sa.Column("overhead_p90", sa.Double(), nullable=False),
        sa.Column("log_sigma", sa.Double(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("n_throughput", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["factor_set_id"],
            ["factor_set.id"],
            name=op.f("fk_segment_factor_factor_set_id_factor_set"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_segment_factor")),
        sa.UniqueConstraint(
            "factor_set_id", "segment", name=op.f("uq_segment_factor_factor_set_id_segment")
        ),
    )
    op.create_table(
        "skipped_run",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("estimate_id", sa.String(length=32), nullable=True),
        sa.Column("pass_id", sa.Integer(), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["pass_id"], ["reconcile_pass.id"], name=op.f("fk_skipped_run_pass_id_reconcile_pass")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_skipped_run")),
        sa.UniqueConstraint("run_id", "reason", name=op.f("uq_skipped_run_run_id_reason")),
    )
    op.create_table(
        "sync_state",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("high_water_mark", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pass_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["pass_id"], ["reconcile_pass.id"], name=op.f("fk_sync_state_pass_id_reconcile_pass")
        ),
        sa.PrimaryKeyConstraint("source", name=op.f("pk_sync_state")),
    )
    op.create_table(
        "reconciliation",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("estimate_id", sa.String(length=32), nullable=False),
        sa.Column("run_ids", sa.Text(), nullable=False),
        sa.Column("gpu", sa.String(length=64), nullable=False),
        sa.Column("precision", sa.String(length=16), nullable=False),
        sa.Column("recompute", sa.String(length=16), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("predicted_seconds", sa.Double(), nullable=False),
        sa.Column("predicted_seconds_p10", sa.Double(), nullable=True),
        sa.Column("predicted_seconds_p90", sa.Double(), nullable=True),
        sa.Column("observed_seconds", sa.Double(), nullable=False),
        sa.Column("observed_compute_seconds", sa.Double(), nullable=True),
        sa.Column("ratio", sa.Double(), nullable=False),
        sa.Column("error_pct", sa.Double(), nullable=False),
        sa.Column("abs_error_pct", sa.Double(), nullable=False),
        sa.Column("implied_utilization", sa.Double(), nullable=True),
        sa.Column("implied_overhead", sa.Double(), nullable=True),
        sa.Column("implied_effective_utilization", sa.Double(), nullable=True),
        sa.Column("factors_kind", sa.String(length=16), nullable=False),
        sa.Column("failed_segments", sa.Integer(), nullable=False),
        sa.Column("pass_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["estimate_id"], ["estimate.id"], name=op.f("fk_reconciliation_estimate_id_estimate")
        ),
        sa.ForeignKeyConstraint(
            ["pass_id"],
            ["reconcile_pass.id"],
            name=op.f("fk_reconciliation_pass_id_reconcile_pass"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reconciliation")),
        sa.UniqueConstraint("estimate_id", name=op.f("uq_reconciliation_estimate_id")),
    )
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_reconciliation_ended_at"), ["ended_at"], unique=False)

    op.create_table(
        "run_link",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("estimate_id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["estimate_id"], ["estimate.id"], name=op.f("fk_run_link_estimate_id_estimate")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_link")),
        sa.UniqueConstraint("run_id", name=op.f("uq_run_link_run_id")),
    )
    with op.batch_alter_table("run_link", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_link_estimate_id"), ["estimate_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("run_link", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_link_estimate_id"))

    op.drop_table("run_link")
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reconciliation_ended_at"))

    op.drop_table("reconciliation")
    op.drop_table("sync_state")
    op.drop_table("skipped_run")
    op.drop_table("segment_factor")
    with op.batch_alter_table("mlflow_run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_mlflow_run_ended_at"))

    op.drop_table("mlflow_run")
    with op.batch_alter_table("estimate", schema=None) as batch_op:
        batch_op.drop_index("ix_estimate_created_at")

    op.drop_table("estimate")
    with op.batch_alter_table("reconcile_pass", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reconcile_pass_started_at"))

    op.drop_table("reconcile_pass")
    op.drop_table("pass_claim")
    op.drop_table("factor_set")
