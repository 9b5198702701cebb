"""How many times rank 0's last read failed while a gang was about to end: the gang
waits for a read that answers, a bounded number of times, so that its success is not
lost to one failed read.

Revision ID: 0014_gang_unread_ends
Revises: 0013_mapping_generation
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_gang_unread_ends"
down_revision = "0013_mapping_generation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("unread_ends", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("unread_ends")
