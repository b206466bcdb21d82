"""A pass judges page by page: staged runs carry the estimate they resolved to, and the
judged reconciliations wait in their own staging table until the final transaction copies
them in one statement.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("staged_run", sa.Column("owner", sa.String(length=32), nullable=True))
    op.create_table(
        "staged_reconciliation",
        sa.Column("pass_id", sa.Integer(), nullable=False),
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
        sa.Column("profile", sa.String(length=64), nullable=True),
        sa.Column("note", sa.String(length=32), nullable=True),
        sa.Column("kind", sa.String(length=16), server_default="computed", nullable=False),
        sa.ForeignKeyConstraint(
            ["pass_id"],
            ["reconcile_pass.id"],
            name=op.f("fk_staged_reconciliation_pass_id_reconcile_pass"),
        ),
        sa.PrimaryKeyConstraint("pass_id", "estimate_id", name=op.f("pk_staged_reconciliation")),
    )


def downgrade() -> None:
    op.drop_table("staged_reconciliation")
    with op.batch_alter_table("staged_run") as batch:
        batch.drop_column("owner")
