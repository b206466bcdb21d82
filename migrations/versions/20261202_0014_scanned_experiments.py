"""The experiments passes have read from their beginning: an experiment added to
RECKON_EXPERIMENTS later is backfilled once by the next pass (its runs that ended before
the window), then recorded here. Empty at first: the first pass on an existing database
records what is listed without a backfill (it was read all along).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 07:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scanned_experiment",
        sa.Column("experiment_id", sa.String(64), primary_key=True),
        sa.Column("pass_id", sa.Integer(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("scanned_experiment")
