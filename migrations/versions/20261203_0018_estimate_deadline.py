"""A saved estimate's deadline (`reckon estimate --save --deadline`): an aware UTC time; a
linked run still RUNNING whose P90 finish is after it is at risk (`reckon forecast`,
`/metrics`). NULL for the estimates saved before (no deadline: never at risk).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("estimate", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deadline", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("estimate", schema=None) as batch_op:
        batch_op.drop_column("deadline")
