"""Each instance's SSH host key as first seen, so exec refuses a changed one after a
restart too.

Revision ID: 0006_host_keys
Revises: 0005_tick_gpu_utilization
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_host_keys"
down_revision = "0005_tick_gpu_utilization"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_keys",
        sa.Column("instance_id", sa.String(length=64), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("instance_id", name=op.f("pk_host_keys")),
    )


def downgrade() -> None:
    op.drop_table("host_keys")
