"""Charges of network volumes and Instant Clusters: whose each one is (kept after the
claim, the Job or the resource is gone) and RunPod's hourly charges of them.

Revision ID: 0008_billed_resources
Revises: 0007_clusters
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import reconciler.adapters.store.models

revision = "0008_billed_resources"
down_revision = "0007_clusters"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "billed_resources",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("resource_id", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=True),
        sa.Column("name", sa.String(length=253), nullable=True),
        sa.Column("owner_uid", sa.String(length=64), nullable=True),
        sa.Column("detail", sa.String(length=128), nullable=True),
        sa.Column("updated_at", reconciler.adapters.store.models.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "resource_id", name=op.f("pk_billed_resources")),
    )
    op.create_table(
        "resource_spend_records",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("resource_id", sa.String(length=64), nullable=False),
        sa.Column("bucket_start", reconciler.adapters.store.models.UTCDateTime(), nullable=False),
        sa.Column("bucket_end", reconciler.adapters.store.models.UTCDateTime(), nullable=False),
        sa.Column("total_usd", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(
            "kind", "resource_id", "bucket_start", name=op.f("pk_resource_spend_records")
        ),
    )


def downgrade() -> None:
    op.drop_table("resource_spend_records")
    op.drop_table("billed_resources")
