"""A gang's result: rank 0's exit code, recorded before its cluster's DELETE, when rank
0's log was last read for it, and when RunPod answered the cluster's DELETE.

Revision ID: 0009_gang_results
Revises: 0008_billed_resources
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import reconciler.adapters.store.models

revision = "0009_gang_results"
down_revision = "0008_billed_resources"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("exit_code", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column(
                "result_checked_at", reconciler.adapters.store.models.UTCDateTime(), nullable=True
            )
        )
        batch.add_column(
            sa.Column(
                "delete_answered_at", reconciler.adapters.store.models.UTCDateTime(), nullable=True
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("delete_answered_at")
        batch.drop_column("result_checked_at")
        batch.drop_column("exit_code")
