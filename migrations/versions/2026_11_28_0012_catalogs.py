"""RunPod's catalogs as the reconciler last fetched them, for `reconciler offers`.

Revision ID: 0012_catalogs
Revises: 0011_gone_billed
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_catalogs"
down_revision = "0011_gone_billed"
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
