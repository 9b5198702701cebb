"""The GPU utilization of each pod as a tick's RunPod list showed it, on the tick's row.

Revision ID: 0005_tick_gpu_utilization
Revises: 0004_money
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_tick_gpu_utilization"
down_revision = "0004_money"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ticks") as batch:
        batch.add_column(sa.Column("gpu_utilization", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ticks") as batch:
        batch.drop_column("gpu_utilization")
