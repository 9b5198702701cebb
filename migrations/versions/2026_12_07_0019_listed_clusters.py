"""When a list first showed a cluster of ours without its age (no member's `createdAt`).

Revision ID: 0019_listed_clusters
Revises: 0018_member_logs
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_listed_clusters"
down_revision = "0018_member_logs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "listed_clusters",
        sa.Column("cluster_id", sa.String(length=64), nullable=False),
        sa.Column("first_listed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("cluster_id", name=op.f("pk_listed_clusters")),
    )


def downgrade() -> None:
    op.drop_table("listed_clusters")
