"""Pod logs kept after the end: the last lines of a finished pod's instance.

Revision ID: 0003_pod_logs
Revises: 0002_mirror_key
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_pod_logs"
down_revision = "0002_mirror_key"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pod_logs",
        sa.Column("pod_uid", sa.String(64), nullable=False),
        sa.Column("instance_id", sa.String(64), nullable=True),
        sa.Column("lines", sa.Text(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("saved_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pod_uid"],
            ["mappings.pod_uid"],
            name=op.f("fk_pod_logs_pod_uid_mappings"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pod_uid", name=op.f("pk_pod_logs")),
    )


def downgrade() -> None:
    op.drop_table("pod_logs")
