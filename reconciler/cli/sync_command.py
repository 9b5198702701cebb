"""`reconciler sync`: the loop (the Deployment), or one tick (the CronJob) and its stay."""

from __future__ import annotations

import logging
import signal
import sys
import time
from contextlib import ExitStack
from typing import Any

import click
from sqlalchemy.exc import DatabaseError

from reconciler.adapters.kube.cluster import FALLBACK_NAMESPACE, default_namespace
from reconciler.adapters.kube.errors import KubeError
from reconciler.adapters.runpod.errors import RunPodError
from reconciler.adapters.store import db, migrate
from reconciler.cli import summary
from reconciler.cli.connection import (
    connection_options,
)
from reconciler.cli.context import CliContext, require_latest_schema
from reconciler.cli.options import GroupedHelp, SettingsError, settings_from, settings_options
from reconciler.cli.output import output_option
from reconciler.core.config import DAY, Settings
from reconciler.core.setting import out_of_range
from reconciler.runtime import process_log
from reconciler.runtime.kubelet.sshkey import SshKeyError, load_identity
from reconciler.runtime.process import leader
from reconciler.runtime.process.cronjob_run import WITHOUT_STAY_WARNING, stay_beating
from reconciler.runtime.process.health import parse_address
from reconciler.runtime.process.service import LeadershipLost, LoopOptions, run_loop
from reconciler.runtime.process.wiring import (
    Connections,
    LockHeld,
    RunMode,
    connect,
    holding,
    holding_writer_lease,
)
from reconciler.runtime.process.writer_lease import WriterHeld
from reconciler.runtime.tick.executor import WriterLost

log = logging.getLogger(__name__)


@click.command(cls=GroupedHelp)
@click.option("--once", is_flag=True, help="Run one tick and exit (the CronJob mode).")
@click.option("--dry-run", is_flag=True, help="With --once: print the plan, change nothing.")
@output_option
@connection_options()
@click.option(
    "--migrate/--no-migrate",
    "upgrade",
    envvar="RECONCILER_MIGRATE",
    default=True,
    help="Upgrade the database schema at start.",
)
@click.option(
    "--interval",
    envvar="RECONCILER_INTERVAL",
    default=15.0,
    type=float,
    help="Seconds between ticks in the loop mode (with up to 10% jitter).",
)
@click.option(
    "--heartbeat-interval",
    envvar="RECONCILER_HEARTBEAT_INTERVAL",
    default=10.0,
    type=float,
    help="Seconds between node heartbeats in the loop mode (--once beats once per run).",
)
@click.option(
    "--stay",
    envvar="RECONCILER_STAY",
    default=0.0,
    type=click.FloatRange(min=0),
    help="With --once: after the tick, keep the node's heartbeat (every "
    "--heartbeat-interval) until this many seconds after the run began, so the node "
    "stays Ready until the next CronJob run (its period minus ~10 s; 40 in "
    "deploy/cronjob and the chart).",
)
@click.option(
    "--watch/--no-watch",
    envvar="RECONCILER_WATCH",
    default=True,
    help="Loop mode: watch pods and tick early (after 0.5 s) when one changes.",
)
@click.option(
    "--health-address",
    envvar="RECONCILER_HEALTH_ADDRESS",
    default=":8080",
    help="Where the loop mode serves /healthz, /readyz and /metrics.",
)
@click.option(
    "--leader-elect",
    envvar="RECONCILER_LEADER_ELECT",
    is_flag=True,
    help="Loop mode: act only while holding the leader Lease (for replicas > 1; on in "
    "deploy/ and the chart).",
)
@click.option(
    "--leader-elect-namespace",
    envvar="RECONCILER_LEADER_ELECT_NAMESPACE",
    default=None,
    show_default=False,
    help=f"Namespace of the leader Lease [default: the pod's own, else {FALLBACK_NAMESPACE}].",
)
@click.option(
    "--leader-elect-lease-name",
    envvar="RECONCILER_LEADER_ELECT_LEASE_NAME",
    default=leader.DEFAULT_LEASE_NAME,
    help="Name of the leader Lease (the RBAC rules name it).",
)
@click.option(
    "--leader-elect-lease-duration",
    envvar="RECONCILER_LEADER_ELECT_LEASE_DURATION",
    default=leader.DEFAULT_LEASE_SECONDS,
    type=click.IntRange(min=3),
    help="Seconds a dead leader's Lease blocks a standby; renewed every third.",
)
@settings_options
@click.pass_obj
def sync(
    obj: CliContext,
    once: bool,
    dry_run: bool,
    output: str,
    kubeconfig: str | None,
    kube_context: str | None,
    runpod_url: str,
    runpod_api_key: str,
    upgrade: bool,
    interval: float,
    heartbeat_interval: float,
    stay: float,
    watch: bool,
    health_address: str,
    leader_elect: bool,
    leader_elect_namespace: str | None,
    leader_elect_lease_name: str,
    leader_elect_lease_duration: int,
    **options: Any,
) -> None:
    """Reconcile the virtual node's pods with RunPod instances (a loop, or one tick).

    Without --once, the loop (the Deployment) runs until SIGTERM or SIGINT, which let the
    running tick finish, and serves /healthz, /readyz and /metrics on --health-address.
    With --once, one tick (the CronJob): exit code 1 if either world could not be
    observed or another reconciler acts for the node, 0 for a tick skipped because
    RunPod rate-limited its list. --once --dry-run only reads: it takes no lock and
    writes nothing, so it works beside a running loop.
    """
    settings = _with_ssh_key(settings_from(options))
    _check_loop_options(
        interval, heartbeat_interval, stay, leader_elect_lease_duration, health_address
    )
    loop = LoopOptions(
        interval=interval,
        heartbeat_interval=heartbeat_interval,
        health_address=health_address,
        watch=watch,
        leader_elect=leader_elect,
        leader_namespace=leader_elect_namespace or default_namespace(),
        lease_name=leader_elect_lease_name,
        lease_seconds=leader_elect_lease_duration,
    )
    conn = Connections(
        obj.database_url, runpod_url, runpod_api_key, kubeconfig, upgrade, context=kube_context
    )
    if dry_run and not once:
        raise click.UsageError("--dry-run needs --once")
    if stay and (not once or dry_run):
        raise click.UsageError("--stay needs --once (and no --dry-run): the loop beats anyway")
    if once and not stay and not dry_run:
        log.warning(WITHOUT_STAY_WARNING)
    if once:
        # No kubelet endpoint runs in CronJob mode, and the run's pod (its IP) is gone
        # when it ends: the node advertises no endpoint; `reconciler logs` reads logs.
        settings = settings.with_values(kubelet_port=0)
    try:
        if once:
            if not _run_once(obj, settings, conn, dry_run, output, stay, heartbeat_interval):
                sys.exit(1)
        else:
            run_loop(settings, conn, loop)
    except (LockHeld, LeadershipLost, WriterHeld, WriterLost, migrate.SchemaError) as exc:
        raise click.ClickException(str(exc)) from None
    except DatabaseError as exc:
        raise click.ClickException(db.describe_error(obj.database_url, exc)) from None
    except (KubeError, RunPodError, db.DatabaseURLError, SshKeyError) as exc:
        raise click.ClickException(process_log.redact(f"cannot start: {exc}")) from None


def _check_loop_options(
    interval: float, heartbeat_interval: float, stay: float, lease_seconds: int, health_address: str
) -> None:
    """The loop's own flags, checked like the settings: before anything starts."""
    for flag, value, limits in (
        ("--interval", interval, (0.1, DAY, "a number of seconds")),
        ("--heartbeat-interval", heartbeat_interval, (1, 3600, "a number of seconds")),
        ("--stay", stay, (0, DAY, "a number of seconds")),
        ("--leader-elect-lease-duration", lease_seconds, (3, 3600, "a number of seconds")),
    ):
        problem = out_of_range(value, limits)
        if problem is not None:
            raise SettingsError(f"invalid {flag}: {problem}")
    try:
        parse_address(health_address)
    except ValueError as exc:
        raise SettingsError(f"invalid --health-address: {exc}") from None


def _with_ssh_key(settings: Settings) -> Settings:
    """The settings with the public half of `--ssh-key-file` (made if missing)."""
    if not settings.ssh.key_file:
        return settings
    try:
        identity = load_identity(settings.ssh.key_file)
    except SshKeyError as exc:
        raise click.ClickException(str(exc)) from None
    return settings.with_values(ssh_public_key=identity.public_line)


def _run_once(
    obj: CliContext,
    settings: Settings,
    conn: Connections,
    dry_run: bool,
    output: str,
    stay: float,
    heartbeat_interval: float,
) -> bool:
    """One tick under the writer lock, its summary, then the stay
    (runtime/process/cronjob_run.py). A dry run only reads: no migration and no lock, so it
    also works beside a running loop.
    Whether it all worked: the tick observed both worlds and no heartbeat failed."""
    if dry_run:
        require_latest_schema(obj)
    # A CronJob's deadline sends SIGTERM: exit through the finally blocks, so the writer
    # lock is released instead of blocking the next run until it expires. The handler is
    # ours only for the run (the process may be a test runner, or host other work).
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with connect(settings, conn, RunMode.ONCE, read_only=dry_run) as parts:
            started = parts.engine.clock()
            with ExitStack() as held:
                if not dry_run:  # a dry run writes nothing: no Lease, no lock
                    held.enter_context(holding_writer_lease(parts.writer_lease))
                    held.enter_context(holding(parts.lock))
                report = parts.engine.tick(dry_run=dry_run)
            click.echo(summary.render(report, output, dry_run))
            # The stay only beats (it does not act for the node), and writes nothing to
            # the database: the next run need wait for neither.
            failed_beats = stay_beating(
                parts.heartbeat, started, stay, heartbeat_interval, time.sleep
            )
        return report.ok and not failed_beats
    finally:
        signal.signal(signal.SIGTERM, previous)
