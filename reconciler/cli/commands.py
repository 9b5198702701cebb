"""The `reconciler` command. Every flag is also an environment variable (RECONCILER_*)."""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from reconciler import __version__
from reconciler.adapters.kube.errors import KubeError
from reconciler.adapters.runpod.errors import RunPodError
from reconciler.adapters.store import db, migrate, queries
from reconciler.cli import state_view, summary
from reconciler.cli.options import settings_from, settings_options
from reconciler.core.config import DEFAULT_DATABASE_URL, DEFAULT_RUNPOD_URL, Settings
from reconciler.runtime import leader, logs
from reconciler.runtime.engine import TickReport
from reconciler.runtime.once import WITHOUT_STAY_WARNING, stay_beating
from reconciler.runtime.service import LeadershipLost, LoopOptions, run_loop
from reconciler.runtime.wiring import Connections, LockHeld, RunMode, connect, holding

log = logging.getLogger(__name__)


@dataclass
class CliContext:
    database_url: str

    @contextmanager
    def engine(self) -> Iterator[Engine]:
        try:
            engine = db.make_engine(self.database_url)
        except db.DatabaseURLError as exc:
            raise click.ClickException(str(exc)) from None
        try:
            yield engine
        except OperationalError as exc:
            reason = str(exc.orig) if exc.orig is not None else type(exc).__name__
            raise click.ClickException(
                f"cannot open database {safe_url(self.database_url)}: {reason}"
            ) from None
        finally:
            engine.dispose()


def safe_url(url: str) -> str:
    """The URL as it may be shown: without its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return repr(url)


output_option = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table",
    show_default=True, help="Table for people, JSON for scripts.",
)


@click.group(context_settings={"auto_envvar_prefix": "RECONCILER", "show_default": True})
@click.version_option(__version__, prog_name="reconciler")
@click.option("--database-url", default=DEFAULT_DATABASE_URL,
              help="SQLAlchemy URL of the state store (SQLite or PostgreSQL).")
@click.option("--log-level", default="INFO",
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="Least severe log level printed.")
@click.option("--log-format", default="text", type=click.Choice(["text", "json"]),
              help="Log line format.")
@click.pass_context
def main(ctx: click.Context, database_url: str, log_level: str, log_format: str) -> None:
    """Burst Kubernetes GPU pods onto RunPod, with no leaked or duplicate instances."""
    logs.configure(log_level, log_format)
    ctx.obj = CliContext(database_url=database_url)


@main.group()
def db_group() -> None:
    """Manage the state store's schema."""


main.add_command(db_group, name="db")


@db_group.command("upgrade")
@click.option("--revision", default="head", help="Target revision.")
@click.pass_obj
def db_upgrade(obj: CliContext, revision: str) -> None:
    """Apply the schema migrations up to REVISION (the latest by default)."""
    with obj.engine() as engine:
        migrate.upgrade(engine, revision)
        click.echo(f"database at revision {migrate.current_revision(engine)}")


@db_group.command("current")
@click.pass_obj
def db_current(obj: CliContext) -> None:
    """Print the database's schema revision and whether it is the latest."""
    with obj.engine() as engine:
        current = migrate.current_revision(engine)
    head = migrate.head_revision()
    suffix = " (latest)" if current == head else f" (latest is {head})"
    click.echo(f"{current or 'empty'}{suffix}")


@main.group()
def state() -> None:
    """Inspect the persisted pod-to-instance mapping."""


@state.command("show")
@output_option
@click.option("--namespace", "-n", default=None, help="Only pods of this namespace.")
@click.option("--all", "show_all", is_flag=True,
              help="Include pods whose instance is terminated or that failed.")
@click.pass_obj
def state_show(obj: CliContext, output: str, namespace: str | None, show_all: bool) -> None:
    """Print the mapping table: one row per managed pod."""
    with obj.engine() as engine:
        require_schema(engine)
        with db.session_factory(engine)() as session:
            rows = queries.mappings(session, namespace, include_finished=show_all)
            tick = queries.last_tick(session)
    if output == "json":
        click.echo(json.dumps([state_view.mapping_record(r) for r in rows], indent=2))
        return
    now = datetime.now(UTC)
    click.echo(state_view.render_table([state_view.table_row(r, now) for r in rows]))
    if tick is not None:
        click.echo(f"\nlast tick #{tick.id}: {state_view.format_age(tick.started_at, now)} ago, "
                   f"{tick.actions_applied} applied, {tick.actions_failed} failed")


def require_schema(engine: Engine) -> None:
    if migrate.current_revision(engine) is None:
        raise click.ClickException("the database has no schema yet; run `reconciler db upgrade`")


@main.command()
@click.option("--once", is_flag=True, help="Run one tick and exit (the CronJob mode).")
@click.option("--dry-run", is_flag=True, help="With --once: print the plan, change nothing.")
@output_option
@click.option("--kubeconfig", envvar=["RECONCILER_KUBECONFIG", "KUBECONFIG"], default=None,
              help="Kubeconfig file (default: in-cluster config).")
@click.option("--runpod-url", envvar="RECONCILER_RUNPOD_URL", default=DEFAULT_RUNPOD_URL,
              help="Base URL of the RunPod API.")
@click.option("--runpod-api-key", envvar="RUNPOD_API_KEY", required=True, show_envvar=True,
              show_default=False, help="RunPod API key (prefer the environment variable).")
@click.option("--migrate/--no-migrate", "upgrade", envvar="RECONCILER_MIGRATE", default=True,
              help="Upgrade the database schema at start.")
@click.option("--interval", envvar="RECONCILER_INTERVAL", default=15.0, type=float,
              help="Seconds between ticks in the loop mode.")
@click.option("--heartbeat-interval", envvar="RECONCILER_HEARTBEAT_INTERVAL", default=10.0,
              type=click.FloatRange(min=1), help="Seconds between node heartbeats in the loop "
              "mode (--once beats once per run).")
@click.option("--stay", envvar="RECONCILER_STAY", default=0.0, type=click.FloatRange(min=0),
              help="With --once: after the tick, keep the node's heartbeat (every "
              "--heartbeat-interval) until this many seconds after the run began, so the node "
              "stays Ready until the next CronJob run (its period minus ~10 s).")
@click.option("--watch/--no-watch", envvar="RECONCILER_WATCH", default=True,
              help="Loop mode: watch pods and tick early (after 0.5 s) when one changes.")
@click.option("--health-address", envvar="RECONCILER_HEALTH_ADDRESS", default=":8080",
              help="Where the loop mode serves /healthz, /readyz and /metrics.")
@click.option("--leader-elect", envvar="RECONCILER_LEADER_ELECT", is_flag=True,
              help="Loop mode: act only while holding the leader Lease (for replicas > 1).")
@click.option("--leader-elect-namespace", envvar="RECONCILER_LEADER_ELECT_NAMESPACE",
              default=None, show_default=False,
              help="Namespace of the leader Lease [default: the pod's own, else "
              f"{leader.FALLBACK_NAMESPACE}].")
@click.option("--leader-elect-lease-name", envvar="RECONCILER_LEADER_ELECT_LEASE_NAME",
              default=leader.DEFAULT_LEASE_NAME, help="Name of the leader Lease.")
@click.option("--leader-elect-lease-duration", envvar="RECONCILER_LEADER_ELECT_LEASE_DURATION",
              default=leader.DEFAULT_LEASE_SECONDS, type=click.IntRange(min=3),
              help="Seconds a dead leader's Lease blocks a standby; renewed every third.")
@settings_options
@click.pass_obj
def sync(obj: CliContext, once: bool, dry_run: bool, output: str, kubeconfig: str | None,
         runpod_url: str, runpod_api_key: str, upgrade: bool, interval: float,
         heartbeat_interval: float, stay: float, watch: bool, health_address: str,
         leader_elect: bool,
         leader_elect_namespace: str | None, leader_elect_lease_name: str,
         leader_elect_lease_duration: int, **options: Any) -> None:
    """Reconcile the virtual node's pods with RunPod instances (a loop, or one tick)."""
    settings = settings_from(options)
    loop = LoopOptions(interval=interval, heartbeat_interval=heartbeat_interval,
                       health_address=health_address, watch=watch, leader_elect=leader_elect,
                       leader_namespace=leader_elect_namespace or leader.default_namespace(),
                       lease_name=leader_elect_lease_name,
                       lease_seconds=leader_elect_lease_duration)
    conn = Connections(obj.database_url, runpod_url, runpod_api_key, kubeconfig, upgrade)
    if dry_run and not once:
        raise click.UsageError("--dry-run needs --once")
    if stay and (not once or dry_run):
        raise click.UsageError("--stay needs --once (and no --dry-run): the loop beats anyway")
    if once and not stay and not dry_run:
        log.warning(WITHOUT_STAY_WARNING)
    try:
        if once:
            report = _run_once(settings, conn, dry_run, output, stay, heartbeat_interval)
            if not report.ok:
                sys.exit(1)
        else:
            run_loop(settings, conn, loop)
    except (LockHeld, LeadershipLost) as exc:
        raise click.ClickException(str(exc)) from None
    except (KubeError, RunPodError, db.DatabaseURLError, OperationalError) as exc:
        raise click.ClickException(logs.redact(f"cannot start: {exc}")) from None


def _run_once(settings: Settings, conn: Connections, dry_run: bool, output: str,
              stay: float, heartbeat_interval: float) -> TickReport:
    """One tick under the writer lock, its summary, then the stay (runtime/once.py)."""
    # A CronJob's deadline sends SIGTERM: exit through the finally blocks, so the writer
    # lock is released instead of blocking the next run until it expires. The handler is
    # ours only for the run (the process may be a test runner, or host other work).
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with connect(settings, conn, RunMode.ONCE) as parts:
            started = parts.engine.clock()
            with holding(parts.lock):
                report = parts.engine.tick(dry_run=dry_run)
            click.echo(summary.render(report, output, dry_run))
            # The stay writes nothing to the database: the next run need not wait.
            stay_beating(parts.heartbeat, started, stay, heartbeat_interval, time.sleep)
        return report
    finally:
        signal.signal(signal.SIGTERM, previous)
