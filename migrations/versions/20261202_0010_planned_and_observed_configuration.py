"""Planned against observed configuration: the GPU count, tokens and precision a run
states about itself (stored and staged runs), and on each reconciliation (stored and
staged) the planned and observed values and the check between them (config_differs,
config_from_plan). Existing rows keep NULL: their runs were read before Reckon kept it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 01:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUN_TABLES = ("mlflow_run", "staged_run")
_RECONCILIATION_TABLES = ("reconciliation", "staged_reconciliation")


def _configuration(prefix: str) -> list[sa.Column[object]]:
    return [
        sa.Column(f"{prefix}gpus", sa.Integer(), nullable=True),
        sa.Column(f"{prefix}tokens", sa.Double(), nullable=True),
        sa.Column(f"{prefix}precision", sa.String(length=16), nullable=True),
    ]


def upgrade() -> None:
    for table in _RUN_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in _configuration("observed_"):
                batch_op.add_column(column)
    for table in _RECONCILIATION_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("config_check", sa.String(length=16), nullable=True))
            for column in (*_configuration("planned_"), *_configuration("observed_")):
                batch_op.add_column(column)


def downgrade() -> None:
    for table in _RECONCILIATION_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in (*_configuration("observed_"), *_configuration("planned_")):
                batch_op.drop_column(column.name)
            batch_op.drop_column("config_check")
    for table in _RUN_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in _configuration("observed_"):
                batch_op.drop_column(column.name)
