"""Tokens per optimizer step as the run itself logged them: each MLflow run's (and the
pass's staged copy's) value derived by its logging profile (tokens ÷ optimizer steps), and
the reconciliation's, which the refit prefers to the estimate's planned
`global_batch_tokens`. NULL for the runs read before (unknown: the plan's is used).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 19:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("mlflow_run", "staged_run", "reconciliation", "staged_reconciliation")
_COLUMN = "observed_global_batch_tokens"


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column(_COLUMN, sa.Double(), nullable=True))


def downgrade() -> None:
    for table in reversed(_TABLES):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(_COLUMN)
