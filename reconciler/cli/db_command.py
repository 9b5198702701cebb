"""`reconciler db`: the state store's schema, upgraded, downgraded or shown."""

from __future__ import annotations

import json

import click

from reconciler.adapters.store import migrate
from reconciler.cli.context import CliContext
from reconciler.cli.output import output_option


@click.group("db")
def db_group() -> None:
    """Manage the state store's schema."""


@db_group.command("upgrade")
@click.option("--revision", default="head", help="Target revision.")
@output_option
@click.pass_obj
def db_upgrade(obj: CliContext, revision: str, output: str) -> None:
    """Apply the schema migrations up to REVISION (the latest by default).

    `reconciler sync` does this itself at start, unless --no-migrate.
    """
    with obj.database() as database:
        migrate.upgrade(database, revision)
        current = migrate.current_revision(database)
    _say_revision(current, output)


@db_group.command("downgrade")
@click.argument("revision")
@output_option
@click.pass_obj
def db_downgrade(obj: CliContext, revision: str, output: str) -> None:
    """Undo the schema migrations after REVISION, to roll back to an older reconciler.

    Run it with the newer reconciler (it knows how to undo its own migrations), while no
    reconciler runs; `reconciler db current` of the older one names the REVISION it needs.
    """
    with obj.database(must_exist=True) as database:
        migrate.downgrade(database, revision)
        current = migrate.current_revision(database)
    _say_revision(current, output)


@db_group.command("current")
@output_option
@click.pass_obj
def db_current(obj: CliContext, output: str) -> None:
    """Print the database's schema revision and whether it is the latest."""
    with obj.database(must_exist=True) as database:
        current = migrate.current_revision(database)
    head = migrate.head_revision()
    if output == "json":
        click.echo(json.dumps({"revision": current, "latest": head}))
        return
    suffix = " (latest)" if current == head else f" (latest is {head})"
    click.echo(f"{current or 'empty'}{suffix}")


def _say_revision(current: str | None, output: str) -> None:
    """Where an upgrade or a downgrade left the schema."""
    if output == "json":
        click.echo(json.dumps({"revision": current, "latest": migrate.head_revision()}))
    else:
        click.echo(f"database at revision {current}")
