"""The output option the commands share: a table for people, JSON for scripts."""

from __future__ import annotations

import click


def _output_default(ctx: click.Context, _param: click.Parameter, value: str | None) -> str:
    """Without --output, JSON logs (--log-format json) make every output JSON too."""
    if value is not None:
        return value
    return "json" if json_mode(ctx) else "table"


def json_mode(ctx: click.Context) -> bool:
    return ctx.find_root().params.get("log_format") == "json"


output_option = click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json"]),
    default=None,
    callback=_output_default,
    show_default=False,
    help="Table for people, JSON for scripts [default: json with --log-format json, else table].",
)
