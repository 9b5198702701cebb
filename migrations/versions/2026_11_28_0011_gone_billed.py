"""Ids RunPod billed that it neither listed nor answered for, since when, and what it
charged for them afterwards: the ghost-charge audit's one fact.

Revision ID: 0011_gone_billed
Revises: 0010_listed_volumes
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import reconciler.adapters.store.models

revision = "0011_gone_billed"
down_revision = "0010_listed_volumes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gone_billed",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("resource_id", sa.String(length=64), nullable=False),
        sa.Column("gone_since", reconciler.adapters.store.models.UTCDateTime(), nullable=False),
        sa.Column("charged_usd", sa.Float(), nullable=True),
        sa.Column("named_by", sa.String(length=300), nullable=True),
        sa.PrimaryKeyConstraint("kind", "resource_id", name=op.f("pk_gone_billed")),
    )


def downgrade() -> None:
    op.drop_table("gone_billed")
