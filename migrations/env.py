"""Alembic environment: runs against the engine the reconciler hands in."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, Engine

from reconciler.adapters.store.models import Base

target_metadata = Base.metadata


# Any fixed number: it names the one advisory lock that migrations take on PostgreSQL.
_MIGRATION_LOCK_KEY = 0x72756E706F64


def _serialize_migrations(connection: Connection) -> None:
    """Two replicas starting together both migrate (before either holds the writer lock):
    the second waits for the first's transaction, then finds the schema at head. DDL is
    transactional on SQLite and PostgreSQL, so a migration is whole or not at all."""
    if connection.dialect.name == "sqlite":
        # A write lock from the start; waits out another migration for the busy timeout.
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK_KEY})")


def run_migrations_online() -> None:
    engine: Engine = context.config.attributes["engine"]
    with engine.connect() as connection:
        _serialize_migrations(connection)
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            # SQLite cannot ALTER most things; batch mode rebuilds tables instead.
            render_as_batch=True,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
