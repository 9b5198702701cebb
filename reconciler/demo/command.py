"""`reconciler demo`: the one command that needs the simulators, so it lives with them
(docs/architecture.md §1) and `reconciler.app` adds it to the CLI's commands."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING

import click

from reconciler.cli.output import output_option

if TYPE_CHECKING:
    from reconciler.demo.live import LiveWorld
    from reconciler.demo.run import DemoResult


@click.command()
@click.option(
    "--keep-running",
    is_flag=True,
    help="Leave the simulated world running in real time afterwards, and print "
    "commands (kubectl among them) to use it.",
)
@output_option
def demo(keep_running: bool, output: str) -> None:
    """Run the whole reconciler against the built-in simulators: no cluster, no RunPod key.

    A scripted scenario on a simulated clock, every step a real tick of the real engine
    over loopback HTTP, told one line per Kubernetes Event; then the mapping table and a
    summary that checks for duplicate and leaked instances.
    """
    from reconciler.demo.live import TICK_SECONDS
    from reconciler.demo.run import run_demo, summary_record

    echo = click.echo if output == "table" else (lambda _line: None)
    if logging.getLogger().level == logging.INFO:
        # The narration shows every decision; routine INFO lines would only repeat it.
        logging.getLogger("reconciler").setLevel(logging.WARNING)
        # The simulators' servers (sshd, WebSocket) log each connection at INFO.
        for name in ("asyncssh", "websockets"):
            logging.getLogger(name).setLevel(logging.WARNING)

    def print_json(result: DemoResult) -> None:
        if output == "json":
            click.echo(json.dumps(summary_record(result), indent=2))

    def run_until_stopped(world: LiveWorld) -> None:
        """Step the demo world every TICK_SECONDS until SIGINT (Ctrl-C) or SIGTERM."""
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        # Only now: a person (or script) may act on this line at once.
        click.echo("Stop with Ctrl-C (SIGINT) or SIGTERM.", err=output == "json")
        while not stop.wait(TICK_SECONDS):
            world.step()
        click.echo("stopping the simulators", err=True)

    result = run_demo(echo, keep_running=keep_running, wait=run_until_stopped, on_result=print_json)
    if result.duplicates or result.leaked:
        sys.exit(1)
