"""A random token beside the count of writes to `mappings`, replaced by every write.

The count alone could read again as a process had cached it after the rows changed: an
older backup restored moves it back, and later writes move it up to the cached value
again, over other rows. A token drawn at random by each write cannot come back by
counting; only a restore of the very state it was drawn for brings it back, and that
state has those rows. So a reader reuses its rows only while count and token both read
as they did (`Store.load_rows`).

Revision ID: 0016_mapping_generation_token
Revises: 0015_rows_of_a_node
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_mapping_generation_token"
down_revision = "0015_rows_of_a_node"
branch_labels = None
depends_on = None

_SQLITE_EVENTS = ("INSERT", "UPDATE", "DELETE")
_SQLITE_TOKEN = "lower(hex(randomblob(16)))"
# random() alone repeats across backends seeded alike; with the statement's clock it does not.
_POSTGRES_TOKEN = "md5(random()::text || clock_timestamp()::text || txid_current()::text)"


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if not postgres:  # SQLite's table changes trip over triggers that name the table
        _drop_sqlite_triggers()
    with op.batch_alter_table("mapping_generation") as batch:
        batch.add_column(
            sa.Column("token", sa.String(length=32), nullable=False, server_default="")
        )
    token = _POSTGRES_TOKEN if postgres else _SQLITE_TOKEN
    op.execute(f"UPDATE mapping_generation SET token = {token}")
    if postgres:
        _postgres_bump(f"value = value + 1, token = {token}")
    else:
        _create_sqlite_triggers(f"value = value + 1, token = {token}")


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        _postgres_bump("value = value + 1")
    else:
        _drop_sqlite_triggers()
    with op.batch_alter_table("mapping_generation") as batch:
        batch.drop_column("token")
    if not postgres:
        _create_sqlite_triggers("value = value + 1")


def _postgres_bump(change: str) -> None:
    op.execute(
        "CREATE OR REPLACE FUNCTION mapping_generation_bump() RETURNS trigger AS $$ "
        f"BEGIN UPDATE mapping_generation SET {change} WHERE id = 1; "
        "RETURN NULL; END $$ LANGUAGE plpgsql"
    )


def _drop_sqlite_triggers() -> None:
    for event in _SQLITE_EVENTS:
        op.execute(f"DROP TRIGGER mappings_{event.lower()}")


def _create_sqlite_triggers(change: str) -> None:
    for event in _SQLITE_EVENTS:
        op.execute(
            f"CREATE TRIGGER mappings_{event.lower()} AFTER {event} ON mappings "
            f"BEGIN UPDATE mapping_generation SET {change} WHERE id = 1; END"
        )
