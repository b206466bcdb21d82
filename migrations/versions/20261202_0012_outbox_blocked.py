"""Write-back entries MLflow refused for want of permission (401/403) are marked blocked:
kept in the outbox, counted apart from the merely pending, retried by every pass. Entries
queued before are not blocked (they were pending, or had been dropped).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tag_outbox") as batch:
        batch.add_column(
            sa.Column("blocked", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("tag_outbox") as batch:
        batch.drop_column("blocked")
