"""`reconciler drain`: end every instance this reconciler owns before uninstalling."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.cli.connection import (
    connection_options,
    reaching,
)
from reconciler.cli.options import settings_from, settings_options_showing
from reconciler.cli.output import output_option
from reconciler.runtime import process_log
from reconciler.runtime.process.drain import StillReconciling, check_no_reconciler
from reconciler.runtime.process.drain import drain as run_drain
from reconciler.runtime.process.wiring import resolve_owner
from reconciler.runtime.tick.engine import utcnow


@click.command()
@click.option(
    "--timeout",
    default=600.0,
    type=click.FloatRange(min=0),
    help="Seconds to wait until RunPod lists none of the instances.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Drain even while a reconciler still beats the virtual node's heartbeat.",
)
@output_option
@connection_options()
@settings_options_showing("node_name", "cluster_id")
def drain(
    timeout: float,
    force: bool,
    output: str,
    kubeconfig: str | None,
    kube_context: str | None,
    runpod_url: str,
    runpod_api_key: str,
    **options: Any,
) -> None:
    """Terminate every RunPod instance this reconciler owns and wait until they are gone.

    Run it after stopping the reconciler and before uninstalling, so that nothing is left
    billing. It finds the instances by their owner tag (cluster id and node name), so it
    needs no database. Exit code 1 if some are still listed when the timeout runs out.
    """
    settings = settings_from(options)
    process_log.register_secret(runpod_api_key)
    try:
        with reaching("cannot drain"):
            kube = KubeClient.from_config(kubeconfig, kube_context)
            try:
                settings = resolve_owner(settings, kube)
                if not force:
                    check_no_reconciler(kube, settings.node.name, utcnow())
            finally:
                kube.close()
            with RunPodClient(runpod_api_key, runpod_url) as runpod:
                report = run_drain(runpod, settings.owner_id, timeout=timeout)
    except StillReconciling as exc:
        raise click.ClickException(str(exc)) from None
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "owner": settings.owner_id,
                    "terminated": report.terminated,
                    "remaining": report.remaining,
                    "errors": report.errors,
                }
            )
        )
    else:
        click.echo(f"terminated {len(report.terminated)} instance(s) owned by {settings.owner_id}")
        if report.remaining:
            click.echo(f"still listed after {timeout:g} s: {', '.join(report.remaining)}")
        else:
            click.echo("RunPod lists none of them any more: nothing of ours is billing")
    if not report.ok:
        sys.exit(1)
