"""The write-back outbox: tags still to be written on MLflow runs, kept until MLflow
accepts them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tag_outbox",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("estimate_id", sa.String(length=32), nullable=False),
        sa.Column("tags", sa.Text(), nullable=False),
        sa.Column("pass_id", sa.Integer(), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["estimate_id"], ["estimate.id"], name=op.f("fk_tag_outbox_estimate_id_estimate")
        ),
        sa.ForeignKeyConstraint(
            ["pass_id"], ["reconcile_pass.id"], name=op.f("fk_tag_outbox_pass_id_reconcile_pass")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_tag_outbox")),
    )


def downgrade() -> None:
    op.drop_table("tag_outbox")
