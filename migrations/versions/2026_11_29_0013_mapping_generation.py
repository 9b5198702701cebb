"""A counter of the changes to `mappings`, moved by the database itself on every write,
so that a reader can tell that no row changed since it last read them without reading
them (the steady tick's rows, `Store.load_rows`). Triggers move it, whoever writes: the
reconciler, another replica, the CLI, or someone's SQL by hand.

Revision ID: 0013_mapping_generation
Revises: 0012_catalogs
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_mapping_generation"
down_revision = "0012_catalogs"
branch_labels = None
depends_on = None

_SQLITE_EVENTS = ("INSERT", "UPDATE", "DELETE")


def upgrade() -> None:
    op.create_table(
        "mapping_generation",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mapping_generation")),
    )
    op.execute("INSERT INTO mapping_generation (id, value) VALUES (1, 0)")
    if op.get_bind().dialect.name == "postgresql":
        # Once per statement: a batch of row writes moves it once.
        op.execute(
            "CREATE FUNCTION mapping_generation_bump() RETURNS trigger AS $$ "
            "BEGIN UPDATE mapping_generation SET value = value + 1 WHERE id = 1; "
            "RETURN NULL; END $$ LANGUAGE plpgsql"
        )
        op.execute(
            "CREATE TRIGGER mappings_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
            "ON mappings FOR EACH STATEMENT EXECUTE FUNCTION mapping_generation_bump()"
        )
        return
    # SQLite has row triggers only, one per kind of write.
    for event in _SQLITE_EVENTS:
        op.execute(
            f"CREATE TRIGGER mappings_{event.lower()} AFTER {event} ON mappings "
            "BEGIN UPDATE mapping_generation SET value = value + 1 WHERE id = 1; END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER mappings_changed ON mappings")
        op.execute("DROP FUNCTION mapping_generation_bump()")
    else:
        for event in _SQLITE_EVENTS:
            op.execute(f"DROP TRIGGER mappings_{event.lower()}")
    op.drop_table("mapping_generation")
