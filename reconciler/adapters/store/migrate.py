"""Alembic, driven from code: the schema is upgraded at start and by `reconciler db`."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

# The top-level migrations/ folder, installed as the package reconciler.migrations.
SCRIPT_LOCATION = str(resources.files("reconciler.migrations"))


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.attributes["engine"] = engine
    return config


class SchemaError(RuntimeError):
    """The database's schema is not one this version can use; the message says why."""


def check_schema(engine: Engine, where: str, *, will_upgrade: bool) -> None:
    """Refuse a schema written by a newer version, and (without upgrading) an old one."""
    current = current_revision(engine)
    script = ScriptDirectory(SCRIPT_LOCATION)
    if current is not None and current not in {r.revision for r in script.walk_revisions()}:
        raise SchemaError(
            f"the database {where} was written by a newer version (schema "
            f"revision {current}): upgrade the reconciler"
        )
    head = script.get_current_head()
    if not will_upgrade and current != head:
        state = "has no schema yet" if current is None else f"is at schema revision {current}"
        raise SchemaError(
            f"the database {where} {state}, not {head}: run `reconciler db "
            "upgrade`, or start without --no-migrate"
        )


def upgrade(engine: Engine, revision: str = "head") -> None:
    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    command.downgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory(SCRIPT_LOCATION).get_current_head()
