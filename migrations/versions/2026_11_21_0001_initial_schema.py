"""Initial schema: mappings, ticks, the action journal and the writer lock.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

STATES = ("pending", "creating", "running", "terminating", "terminated", "failed")


def upgrade() -> None:
    op.create_table(
        "locks",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(253), nullable=False),
        sa.Column("acquired_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_locks")),
    )
    op.create_table(
        "mappings",
        sa.Column("pod_uid", sa.String(64), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column(
            "state",
            sa.Enum(*STATES, name="mappingstate", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("instance_id", sa.String(64), nullable=True),
        sa.Column("instance_name", sa.String(191), nullable=True),
        sa.Column("attempt_id", sa.String(36), nullable=True),
        sa.Column("attempt_started_at", sa.DateTime(), nullable=True),
        sa.Column("gpu_type_id", sa.String(128), nullable=True),
        sa.Column("datacenter_id", sa.String(64), nullable=True),
        sa.Column("cost_per_hr", sa.Float(), nullable=True),
        sa.Column("last_instance_status", sa.String(16), nullable=True),
        sa.Column("status_hash", sa.String(64), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("orphan_sightings", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(64), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("pod_uid", name=op.f("pk_mappings")),
        sa.UniqueConstraint("instance_id", name=op.f("uq_mappings_instance_id")),
    )
    op.create_index(op.f("ix_mappings_namespace"), "mappings", ["namespace"])
    op.create_index(op.f("ix_mappings_state"), "mappings", ["state"])
    op.create_table(
        "ticks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("pods_seen", sa.Integer(), nullable=False),
        sa.Column("instances_seen", sa.Integer(), nullable=False),
        sa.Column("actions_planned", sa.Integer(), nullable=False),
        sa.Column("actions_applied", sa.Integer(), nullable=False),
        sa.Column("actions_failed", sa.Integer(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("error_summary", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ticks")),
    )
    op.create_index(op.f("ix_ticks_started_at"), "ticks", ["started_at"])
    op.create_table(
        "actions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tick_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("pod_uid", sa.String(64), nullable=True),
        sa.Column("instance_id", sa.String(64), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tick_id"],
            ["ticks.id"],
            name=op.f("fk_actions_tick_id_ticks"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_actions")),
    )
    op.create_index(op.f("ix_actions_pod_uid"), "actions", ["pod_uid"])
    op.create_index(op.f("ix_actions_tick_id"), "actions", ["tick_id"])


def downgrade() -> None:
    op.drop_table("actions")
    op.drop_table("ticks")
    op.drop_table("mappings")
    op.drop_table("locks")
