"""Rows belong to a node: the virtual node whose reconciler wrote a pod's mapping row or a
gang's cluster row, so that several nodes share one database and each reads and writes
only its own (docs/architecture.md §4, "One writer per node"). Rows written before have
none, and are taken by the first node that writes them.

Revision ID: 0015_rows_of_a_node
Revises: 0014_gang_unread_ends
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_rows_of_a_node"
down_revision = "0014_gang_unread_ends"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Not in batch mode: SQLite would copy `mappings` into a new table, and its triggers
    # (0013) would go with the old one. Both databases add and drop a column in place.
    for table in ("mappings", "clusters"):
        op.add_column(table, sa.Column("node", sa.String(length=253), nullable=True))
        op.create_index(op.f(f"ix_{table}_node"), table, ["node"], unique=False)


def downgrade() -> None:
    for table in ("clusters", "mappings"):
        op.drop_index(op.f(f"ix_{table}_node"), table_name=table)
        op.drop_column(table, "node")
