"""The network volumes of ours the most recent volume list showed, and when it was
read: the leak audit tells from them on every tick without listing again.

Revision ID: 0010_listed_volumes
Revises: 0009_gang_results
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import reconciler.adapters.store.models

revision = "0010_listed_volumes"
down_revision = "0009_gang_results"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "listed_volumes",
        sa.Column("volume_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=191), nullable=False),
        sa.Column("size_gb", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("datacenter", sa.String(length=64), nullable=False),
        sa.Column(
            "first_listed_at", reconciler.adapters.store.models.UTCDateTime(), nullable=False
        ),
        sa.Column("leaked_since", reconciler.adapters.store.models.UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("volume_id", name=op.f("pk_listed_volumes")),
    )
    op.create_table(
        "resource_lists",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("listed_at", reconciler.adapters.store.models.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_resource_lists")),
    )


def downgrade() -> None:
    op.drop_table("resource_lists")
    op.drop_table("listed_volumes")
