"""An index on the pass that wrote each reconciliation: the refit at the end of a pass reads
only that pass's rows (the rest it read early, beside the MLflow scan), and without the
index each of its two reads by pass scanned every reconciliation, a cost that grew with the
history (about 10 ms per read at 51,000 rows on PostgreSQL).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04 16:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "ix_reconciliation_pass_id"


def upgrade() -> None:
    op.create_index(_INDEX, "reconciliation", ["pass_id"], unique=False)


def downgrade() -> None:
    op.drop_index(_INDEX, table_name="reconciliation")
