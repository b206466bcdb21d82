"""Staged runs: what a reconcile pass has read from MLflow but not yet applied.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 02:02:35.121355
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "staged_run",
        sa.Column("pass_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("experiment_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("estimate_tag", sa.String(length=64), nullable=True),
        sa.Column("throughput", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["pass_id"], ["reconcile_pass.id"], name=op.f("fk_staged_run_pass_id_reconcile_pass")
        ),
        sa.PrimaryKeyConstraint("pass_id", "run_id", name=op.f("pk_staged_run")),
    )


def downgrade() -> None:

    op.drop_table("staged_run")
