"""The gangs' Instant Clusters: one row per gang, its create intent and its cluster's id.

Revision ID: 0007_clusters
Revises: 0006_host_keys
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import reconciler.adapters.store.models

revision = "0007_clusters"
down_revision = "0006_host_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("gang", sa.String(length=64), nullable=False),
        sa.Column("job_uid", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("job_name", sa.String(length=253), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column(
            "attempt_started_at", reconciler.adapters.store.models.UTCDateTime(), nullable=False
        ),
        sa.Column("updated_at", reconciler.adapters.store.models.UTCDateTime(), nullable=False),
        sa.Column("cluster_id", sa.String(length=64), nullable=True),
        sa.Column("gpu_type_id", sa.String(length=128), nullable=True),
        sa.Column("pod_count", sa.Integer(), nullable=False),
        sa.Column("cost_per_hr", sa.Float(), nullable=True),
        sa.Column("reason", sa.String(length=64), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("gang", name=op.f("pk_clusters")),
        sa.UniqueConstraint("cluster_id", name=op.f("uq_clusters_cluster_id")),
    )
    with op.batch_alter_table("clusters") as batch:
        batch.create_index(batch.f("ix_clusters_job_uid"), ["job_uid"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_index(batch.f("ix_clusters_job_uid"))
    op.drop_table("clusters")
