"""`reconciler logs POD`: a pod's log from the CLI, as `kubectl logs` shows it through the
kubelet endpoint; for CronJob mode (where no endpoint runs) and for debugging."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.cli.connection import (
    connection_options,
    reaching,
)
from reconciler.cli.options import some_settings_options
from reconciler.cli.pod_argument import METAVAR, namespace_option, pod_of
from reconciler.core.logs.kubectl_logs import EARLIEST, MOST_SINCE_SECONDS, LogOptions, render
from reconciler.runtime import process_log
from reconciler.runtime.logs.sources import LogError, PodLogs
from reconciler.runtime.process.wiring import open_store

_DURATION_PART = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,9})?)(h|m|s)")


def parse_duration(text: str) -> timedelta:
    """A duration as kubectl takes it: `90s`, `5m`, `1h30m`."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise click.BadParameter(f"{text!r} is not a duration such as 30s, 5m or 1h30m")
    unit = {"h": 3600, "m": 60, "s": 1}
    seconds = sum(float(amount) * unit[u] for amount, u in parts)
    if seconds > MOST_SINCE_SECONDS:
        raise click.BadParameter(f"{text!r} is longer than {MOST_SINCE_SECONDS // 86400} days")
    return timedelta(seconds=seconds)


@click.command("logs")
@click.argument("pod", metavar=METAVAR)
@namespace_option
@click.option(
    "--container", "-c", default="", help="The container (default: the one that runs on RunPod)."
)
@click.option("--follow", "-f", is_flag=True, help="Keep streaming until the pod stops.")
@click.option(
    "--tail",
    type=click.IntRange(min=-1),
    default=-1,
    help="Only the last N lines (-1: all RunPod keeps, up to 5000).",
)
@click.option("--since", default=None, help="Only lines newer than this, e.g. 5m or 1h.")
@click.option("--timestamps", is_flag=True, help="Prefix each line with its time.")
@connection_options()
@some_settings_options("node_name")
@click.pass_obj
def logs_command(
    obj: Any,
    pod: str,
    namespace: str | None,
    container: str,
    follow: bool,
    tail: int,
    since: str | None,
    timestamps: bool,
    kubeconfig: str | None,
    kube_context: str | None,
    runpod_url: str,
    runpod_api_key: str,
    node_name: str,
) -> None:
    """Print a pod's log: from its RunPod instance, or the lines kept after it ended.

    What `kubectl logs` shows through the virtual node's kubelet endpoint, read from
    RunPod and the state store directly: for CronJob mode, where no endpoint runs (with
    the CronJob's --database-url and RunPod key), and for debugging.
    """
    process_log.register_secret(runpod_api_key)
    namespace, pod = pod_of(pod, namespace)
    now = datetime.now(UTC)
    options = LogOptions(
        follow=follow,
        tail_lines=None if tail < 0 else tail,
        since=max(EARLIEST, now - parse_duration(since)) if since else None,
        timestamps=timestamps,
    )
    database_url: str = obj.database_url  # the group's CliContext
    try:
        with reaching():
            kube = KubeClient.from_config(kubeconfig, kube_context)
            with RunPodClient(runpod_api_key, runpod_url) as runpod:
                source = PodLogs(
                    node_name,
                    runpod,
                    kube,
                    open_store(database_url, upgrade=False),
                    lambda: datetime.now(UTC),
                )
                for data in render(source.lines(namespace, pod, container, options), options):
                    sys.stdout.buffer.write(data)
                    sys.stdout.buffer.flush()
    except LogError as exc:
        raise click.ClickException(exc.message) from None
    except KeyboardInterrupt:
        pass
