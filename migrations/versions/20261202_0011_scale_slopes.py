"""Scale slopes: each stored segment's slopes of log utilization on log GPU count and log
parameters (0 for the sets fitted before: no slope), the reference scale its levels are at,
and the GPU counts, parameter counts and tokens of the runs it was fitted on (NULL before).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SLOPES = (
    "gpus_slope",
    "gpus_slope_se",
    "log_gpus_reference",
    "params_slope",
    "params_slope_se",
    "log_params_reference",
)
_RANGES = (
    "gpus_min",
    "gpus_max",
    "params_min",
    "params_max",
    "tokens_min",
    "tokens_max",
)


def upgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        for name in _SLOPES:
            batch_op.add_column(sa.Column(name, sa.Double(), server_default="0", nullable=False))
        for name in _RANGES:
            batch_op.add_column(sa.Column(name, sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        for name in (*reversed(_RANGES), *reversed(_SLOPES)):
            batch_op.drop_column(name)
