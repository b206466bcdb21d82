"""The refit's early read kept between passes (service.adapters.db.observation_snapshot):
one row holding the columns the last pass read, the passes they cover and the links'
version then. On PostgreSQL the blob is stored without compression: its floats do not
compress, and trying costs the pass time.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "observation_snapshot",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("through_pass_id", sa.Integer(), nullable=False),
        sa.Column("links_version", sa.Integer(), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE observation_snapshot ALTER COLUMN payload SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("observation_snapshot")
