"""The `reconciler` command: the root group and its global options; each subcommand is a
module of its own. Every flag is also an environment variable (RECONCILER_*)."""

from __future__ import annotations

import json
from typing import Any

import click

from reconciler import __version__
from reconciler.cli.context import CliContext
from reconciler.cli.cost_command import cost
from reconciler.cli.db_command import db_group
from reconciler.cli.drain_command import drain
from reconciler.cli.exec_command import exec_command
from reconciler.cli.logs_command import logs_command
from reconciler.cli.offers_command import offers_command
from reconciler.cli.output import json_mode
from reconciler.cli.state_command import state
from reconciler.cli.sync_command import sync
from reconciler.core.config import DEFAULT_DATABASE_URL
from reconciler.runtime import process_log

# The group's own options, which people also write after the subcommand.
GLOBAL_OPTIONS = ("--database-url", "--log-level", "--log-format")


class _Reconciler(click.Group):
    """The root group: global options anywhere on the line, and JSON errors in JSON mode."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if not json_mode(ctx):
                raise
            kind = _JSONUsageError if exc.exit_code == _JSONUsageError.exit_code else _JSONError
            raise kind(exc.format_message()) from None


def hoist_global_options(args: list[str]) -> list[str]:
    """Move the global options (each with its value) in front of the subcommand, where
    click looks for them: `reconciler state show --database-url X` then works."""
    hoisted: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest += args[index:]
            break
        name = arg.partition("=")[0]
        if name in GLOBAL_OPTIONS:
            takes_next = "=" not in arg and index + 1 < len(args)
            hoisted += args[index : index + 1 + takes_next]
            index += 1 + takes_next
            continue
        rest.append(arg)
        index += 1
    return hoisted + rest


class _JSONError(click.ClickException):
    """A user error as one JSON object on standard error."""

    def show(self, file: Any = None) -> None:
        click.echo(json.dumps({"error": self.format_message()}), err=True)


class _JSONUsageError(_JSONError):
    exit_code = 2


@click.group(
    cls=_Reconciler, context_settings={"auto_envvar_prefix": "RECONCILER", "show_default": True}
)
@click.version_option(__version__, prog_name="reconciler")
@click.option(
    "--database-url",
    default=DEFAULT_DATABASE_URL,
    help="SQLAlchemy URL of the state store: SQLite (run with WAL and a busy timeout) for "
    "one replica, postgresql+psycopg://user:pass@host/db for replicas (the postgres "
    "extra, in the image already).",
)
@click.option(
    "--log-level",
    default="INFO",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Least severe log level printed.",
)
@click.option(
    "--log-format",
    default="text",
    type=click.Choice(["text", "json"]),
    help="Log line format: json for log collectors, and then every command's output and "
    "errors are JSON too.",
)
@click.pass_context
def main(ctx: click.Context, database_url: str, log_level: str, log_format: str) -> None:
    """Burst Kubernetes GPU pods onto RunPod, with no leaked or duplicate instances.

    Every flag is also an environment variable. The global options (--database-url,
    --log-level, --log-format) may come before or after the subcommand. With --log-format
    json every command prints JSON (its --output default turns to json, and errors are
    {"error": ...} on standard error), so a script or a log collector never sees a table.
    The RunPod key comes only from the environment or the flag, never from the database.
    """
    process_log.configure(log_level, log_format)
    ctx.obj = CliContext(database_url=database_url)


main.add_command(db_group)
main.add_command(state)
main.add_command(cost)
main.add_command(sync)
main.add_command(drain)
main.add_command(logs_command)
main.add_command(exec_command)
main.add_command(offers_command)
