"""Logging profiles: which profile a run was read with and the compute time it gave (stored
and staged runs), and on each reconciliation the profile, a note (overhead_clamped) and its
estimate's kind (computed, external, retrospective), so accuracy can keep retrospective
ones apart without a join. The estimate's own kind column is a string already.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 09:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUN_TABLES = ("mlflow_run", "staged_run")


def upgrade() -> None:
    for table in _RUN_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("profile", sa.String(length=64), nullable=True))
            batch_op.add_column(sa.Column("compute_seconds", sa.Double(), nullable=True))
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.add_column(sa.Column("profile", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("note", sa.String(length=32), nullable=True))
        batch_op.add_column(
            sa.Column("kind", sa.String(length=16), server_default="computed", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("reconciliation", schema=None) as batch_op:
        batch_op.drop_column("kind")
        batch_op.drop_column("note")
        batch_op.drop_column("profile")
    for table in _RUN_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("compute_seconds")
            batch_op.drop_column("profile")
