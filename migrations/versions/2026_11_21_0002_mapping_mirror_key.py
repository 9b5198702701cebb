"""Mappings remember the mirror key, so a steady tick skips recomputing each pod's status.

Rows upgraded from 0001 start without a key: the first tick after the upgrade computes
every running pod's status once and saves its key (one row write per running pod).

Revision ID: 0002_mirror_key
Revises: 0001_initial
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_mirror_key"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mappings") as batch:
        batch.add_column(sa.Column("mirror_key", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mappings") as batch:
        batch.drop_column("mirror_key")
