"""The last lines of a gang pod's log, kept when its Instant Cluster is deleted.

Revision ID: 0018_member_logs
Revises: 0017_start_failures
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_member_logs"
down_revision = "0017_start_failures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "member_logs",
        sa.Column("pod_uid", sa.String(length=64), nullable=False),
        sa.Column("job_uid", sa.String(length=64), nullable=False),
        sa.Column("instance_id", sa.String(length=64), nullable=False),
        sa.Column("lines", sa.Text(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("saved_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("pod_uid", name=op.f("pk_member_logs")),
    )


def downgrade() -> None:
    op.drop_table("member_logs")
