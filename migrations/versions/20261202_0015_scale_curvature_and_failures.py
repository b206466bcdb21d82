"""Scale, second part: each stored segment's model-size curvature (log utilization bends with
log parameters) with the range of log parameters it was fitted on, and the failure term
(FAILED/KILLED segments per GPU-hour and the hours one costs). 0 for the sets fitted
before: no curvature, no failure term, so they predict exactly as they did.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 19:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    "params_curvature",
    "params_curvature_se",
    "log_params_low",
    "log_params_high",
    "failure_rate",
    "failure_cost_hours",
    "failure_cost_se",
)


def upgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        for name in _COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Double(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        for name in reversed(_COLUMNS):
            batch_op.drop_column(name)
