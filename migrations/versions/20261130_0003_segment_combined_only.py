"""Segment factors say whether only the combined factor u·(1−f) was fitted from the
segment's own runs (no throughput logged), so planners are told.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 02:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("combined_only", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        batch_op.drop_column("combined_only")
