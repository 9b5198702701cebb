"""Money (docs/architecture.md §3, Money): exit-code and end times on mappings, billing
records, the billing read cursor, namespace budgets and unowned look-alike instances.

Rows upgraded from 0003 have no `ended_at`: the leak audit skips them (it cannot tell
when their pods ended), and their retention counts from `updated_at`.

Revision ID: 0004_money
Revises: 0003_pod_logs
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_money"
down_revision = "0003_pod_logs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mappings") as batch:
        batch.add_column(sa.Column("exited_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("ended_at", sa.DateTime(), nullable=True))
    op.create_table(
        "spend_records",
        sa.Column("instance_id", sa.String(64), nullable=False),
        sa.Column("bucket_start", sa.DateTime(), nullable=False),
        sa.Column("bucket_end", sa.DateTime(), nullable=False),
        sa.Column("total_usd", sa.Float(), nullable=False),
        sa.Column("gpu_usd", sa.Float(), nullable=False),
        sa.Column("disk_usd", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("instance_id", "bucket_start", name=op.f("pk_spend_records")),
    )
    op.create_table(
        "billing_reads",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("covered_until", sa.DateTime(), nullable=False),
        sa.Column("read_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_billing_reads")),
    )
    op.create_table(
        "namespace_budgets",
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("max_hourly_spend", sa.Float(), nullable=True),
        sa.Column("max_instances", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("namespace", name=op.f("pk_namespace_budgets")),
    )
    op.create_table(
        "unowned_instances",
        sa.Column("instance_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(191), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("pod_name", sa.String(253), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("instance_id", name=op.f("pk_unowned_instances")),
    )


def downgrade() -> None:
    op.drop_table("unowned_instances")
    op.drop_table("namespace_budgets")
    op.drop_table("billing_reads")
    op.drop_table("spend_records")
    with op.batch_alter_table("mappings") as batch:
        batch.drop_column("ended_at")
        batch.drop_column("exited_at")
