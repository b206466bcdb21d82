"""Segment factors carry a calibrated split spread (σ of log wall below and above the
median) and say when a segment fell back to raw factors because calibration backtested
worse there. Existing rows get their symmetric σ on both sides and no fallback.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 09:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        batch_op.add_column(sa.Column("log_sigma_low", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("log_sigma_high", sa.Double(), nullable=True))
        batch_op.add_column(
            sa.Column("fallback", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    op.execute("UPDATE segment_factor SET log_sigma_low = log_sigma, log_sigma_high = log_sigma")
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        batch_op.alter_column("log_sigma_low", existing_type=sa.Double(), nullable=False)
        batch_op.alter_column("log_sigma_high", existing_type=sa.Double(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        batch_op.drop_column("fallback")
        batch_op.drop_column("log_sigma_high")
        batch_op.drop_column("log_sigma_low")
