"""Alembic environment: runs against the engine the reconciler hands in."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from reconciler.adapters.store.models import Base

target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine: Engine = context.config.attributes["engine"]
    with engine.connect() as connection:
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
