"""RunPod's catalogs as the reconciler last fetched them, for `reconciler offers`.

Revision ID: 0010_catalogs
Revises: 0009_gang_results
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_catalogs"
down_revision = "0009_gang_results"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalogs",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("fetched_at", sa.DateTime(), nullable=False),
        sa.Column("entries", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("kind", name=op.f("pk_catalogs")),
    )


def downgrade() -> None:
    op.drop_table("catalogs")
