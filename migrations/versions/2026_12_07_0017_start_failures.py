"""The places a pod's instances failed to start in (`GPU type@data center;...`): a
replacement excludes them, and the pod fails once it has tried enough of them.

Revision ID: 0017_start_failures
Revises: 0016_mapping_generation_token
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_start_failures"
down_revision = "0016_mapping_generation_token"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mappings") as batch:
        batch.add_column(sa.Column("start_failures", sa.Text(), nullable=True))


def downgrade() -> None:
    # Plain SQL, never a batch: SQLite's batch mode copies the table and would drop the
    # triggers of `mapping_generation` (SQLite has dropped columns itself since 3.35).
    op.execute("ALTER TABLE mappings DROP COLUMN start_failures")
