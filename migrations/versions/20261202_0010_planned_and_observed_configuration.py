"""Planned against observed configuration: the GPU count, tokens and precision a run
states about itself (stored and staged runs), and on each reconciliation (stored and
staged) the planned and observed values, the check between them (config_differs,
config_from_plan) and the estimate's active parameter count (a covariate of the refit).
Stored reconciliations get their planned values and parameter count from their estimates;
what their runs observed stays NULL (read before Reckon kept it), and so does the check.

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
_FROM_ESTIMATE = (
    ("planned_gpus", "gpus"),
    ("planned_tokens", "tokens"),
    ("planned_precision", "precision"),
    ("params", "params"),
)


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
            batch_op.add_column(sa.Column("params", sa.Double(), nullable=True))
            for column in (*_configuration("planned_"), *_configuration("observed_")):
                batch_op.add_column(column)
    # The plan of every stored reconciliation is its estimate's (one statement, both dialects).
    values = ", ".join(
        f"{target} = (SELECT e.{source} FROM estimate e WHERE e.id = reconciliation.estimate_id)"
        for target, source in _FROM_ESTIMATE
    )
    op.execute(f"UPDATE reconciliation SET {values}")


def downgrade() -> None:
    for table in _RECONCILIATION_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in (*_configuration("observed_"), *_configuration("planned_")):
                batch_op.drop_column(column.name)
            batch_op.drop_column("params")
            batch_op.drop_column("config_check")
    for table in _RUN_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in _configuration("observed_"):
                batch_op.drop_column(column.name)
