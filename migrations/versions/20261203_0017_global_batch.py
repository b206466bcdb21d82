"""The global batch as a covariate of the factor model: an estimate's tokens per optimizer
step (`--global-batch-tokens`), copied to its reconciliation for the refit (as its
parameters are), and each stored segment's slope of log utilization on log tokens per GPU
per step with its standard error and reference. NULL batch for the estimates saved before
(unknown: no batch term moves them), 0 slopes for the sets fitted before.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH_TABLES = ("estimate", "reconciliation", "staged_reconciliation")
_SLOPES = ("batch_slope", "batch_slope_se", "log_batch_reference")


def upgrade() -> None:
    for table in _BATCH_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("global_batch_tokens", sa.Double(), nullable=True))
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        for name in _SLOPES:
            batch_op.add_column(sa.Column(name, sa.Double(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("segment_factor", schema=None) as batch_op:
        for name in reversed(_SLOPES):
            batch_op.drop_column(name)
    for table in reversed(_BATCH_TABLES):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("global_batch_tokens")
