"""The hand baseline: a segment whose calibrated factors backtested worse than the median
observed factor of its runs falls back to that median, stored as its factors (`by_hand`).
False for the sets stored before: their fallbacks were all to raw.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("by_hand", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        batch_op.drop_column("by_hand")
