"""Utilization that bends with GPU count: each stored segment's curvature of log utilization
in log GPU count, its standard error, and the range of log GPU counts it was fitted on
(beyond it the curve goes on along its tangent). 0 for the sets fitted before: no bend, and
a range of zero width, so they move along their straight GPU slope as they did.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("gpus_curvature", "gpus_curvature_se", "log_gpus_low", "log_gpus_high")


def upgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        for name in _COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Double(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        for name in reversed(_COLUMNS):
            batch_op.drop_column(name)
