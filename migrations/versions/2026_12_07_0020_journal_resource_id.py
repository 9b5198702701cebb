"""The journal's `actions.instance_id` is `resource_id`: it holds the id of whatever cloud
resource the call concerns (an instance, a registry credential, an Instant Cluster, a
network volume), as its rows always did.

Revision ID: 0020_journal_resource_id
Revises: 0019_listed_clusters
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0020_journal_resource_id"
down_revision = "0019_listed_clusters"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.alter_column("instance_id", new_column_name="resource_id")


def downgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.alter_column("resource_id", new_column_name="instance_id")
