"""What every subcommand is handed: the database it reads or migrates, and the
checks that its schema is there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import click
from sqlalchemy import Engine as Database
from sqlalchemy.exc import DatabaseError

from reconciler.adapters.store import db, migrate


@dataclass
class CliContext:
    database_url: str

    @contextmanager
    def database(self, must_exist: bool = False) -> Iterator[Database]:
        """The database (SQLAlchemy's engine, not the reconciler's); with `must_exist`, a
        SQLite file that is not there is an error instead of a new empty database (reading
        must not create one)."""
        missing = db.missing_sqlite_file(self.database_url) if must_exist else None
        if missing is not None:
            raise click.ClickException(
                f"no database at {missing}: pass --database-url (or set "
                "RECONCILER_DATABASE_URL) to the reconciler's database"
            )
        try:
            database = db.make_engine(self.database_url)
        except db.DatabaseURLError as exc:
            raise click.ClickException(str(exc)) from None
        try:
            migrate.check_schema(database, db.location(self.database_url), will_upgrade=True)
            yield database
        except DatabaseError as exc:
            raise click.ClickException(db.describe_error(self.database_url, exc)) from None
        except migrate.SchemaError as exc:
            raise click.ClickException(str(exc)) from None
        finally:
            database.dispose()


def require_schema(database: Database) -> None:
    if migrate.current_revision(database) is None:
        raise click.ClickException("the database has no schema yet; run `reconciler db upgrade`")


def require_latest_schema(obj: CliContext) -> None:
    """A dry run does not migrate: the database must exist and be at the latest schema."""
    with obj.database(must_exist=True) as database:
        current, head = migrate.current_revision(database), migrate.head_revision()
    if current != head:
        raise click.ClickException(
            f"the database schema is at {current or 'nothing'}, not the latest ({head}); "
            "a dry run changes nothing, so run `reconciler db upgrade` first"
        )
