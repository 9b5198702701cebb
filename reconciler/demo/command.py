"""`reconciler demo`: the one command that needs the simulators, so it lives with them
(docs/architecture.md §1) and `reconciler.app` adds it to the CLI's commands."""

from __future__ import annotations

import json
import logging
import sys
import threading

import click

from reconciler.cli.commands import output_option


@click.command()
@click.option("--keep-running", is_flag=True,
              help="Leave the simulators up afterwards and print how to use them.")
@output_option
def demo(keep_running: bool, output: str) -> None:
    """Run the whole reconciler against the built-in simulators: no cluster, no RunPod key."""
    from reconciler.demo.run import run_demo, summary_record

    echo = click.echo if output == "table" else (lambda _line: None)
    if logging.getLogger().level == logging.INFO:
        # The narration shows every decision; routine INFO lines would only repeat it.
        logging.getLogger("reconciler").setLevel(logging.WARNING)
    result = run_demo(echo, keep_running=keep_running, wait=_wait_for_interrupt)
    if output == "json":
        click.echo(json.dumps(summary_record(result), indent=2))
    if result.duplicates or result.leaked:
        sys.exit(1)


def _wait_for_interrupt() -> None:
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        click.echo("stopping the simulators")
