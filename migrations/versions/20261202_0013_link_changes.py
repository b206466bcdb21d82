"""A log of the link changes made outside a pass (link, unlink, import): its largest id is
the version a pass compares at its start and end (was counts over two tables, O(history)),
and an unlink's row stops a pass from restoring a link from a tag it read before.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "link_change",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("change", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("link_change")
