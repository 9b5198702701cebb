"""The `reconciler` command. Every flag is also an environment variable (RECONCILER_*)."""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click
from sqlalchemy import Engine as Database
from sqlalchemy.exc import DatabaseError

from reconciler import __version__
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.errors import KubeError
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.errors import RunPodError
from reconciler.adapters.store import db, migrate, queries
from reconciler.cli import cost_view, state_view, summary
from reconciler.cli.connection import (
    context_option,
    kubeconfig_option,
    reaching,
    runpod_api_key_option,
    runpod_url_option,
)
from reconciler.cli.exec_command import exec_command
from reconciler.cli.logs_command import logs_command
from reconciler.cli.offers_command import offers_command
from reconciler.cli.options import SettingsError, settings_from, settings_options
from reconciler.cli.output import json_mode, output_option
from reconciler.core.config import (
    DAY,
    DEFAULT_DATABASE_URL,
    Settings,
    out_of_range,
)
from reconciler.core.printable import escaped
from reconciler.runtime import leader, process_log
from reconciler.runtime.cronjob_run import WITHOUT_STAY_WARNING, stay_beating
from reconciler.runtime.drain import StillReconciling, check_no_reconciler
from reconciler.runtime.drain import drain as run_drain
from reconciler.runtime.engine import utcnow
from reconciler.runtime.health import parse_address
from reconciler.runtime.kubelet.sshkey import SshKeyError, load_identity
from reconciler.runtime.service import LeadershipLost, LoopOptions, run_loop
from reconciler.runtime.wiring import (
    Connections,
    LockHeld,
    RunMode,
    connect,
    holding,
    holding_writer_lease,
    resolve_owner,
)
from reconciler.runtime.writer_lease import WriterHeld, WriterLost

log = logging.getLogger(__name__)


@dataclass
class CliContext:
    database_url: str

    @contextmanager
    def database(self, must_exist: bool = False) -> Iterator[Database]:
        """The database (SQLAlchemy's engine, not the reconciler's); with `must_exist`, a
        SQLite file that is not there is an error instead of a new empty database (reading
        must not create one)."""
        missing = db.missing_sqlite_file(self.database_url) if must_exist else None
        if missing is not None:
            raise click.ClickException(
                f"no database at {missing}: pass --database-url (or set "
                "RECONCILER_DATABASE_URL) to the reconciler's database"
            )
        try:
            database = db.make_engine(self.database_url)
        except db.DatabaseURLError as exc:
            raise click.ClickException(str(exc)) from None
        try:
            migrate.check_schema(database, db.location(self.database_url), will_upgrade=True)
            yield database
        except DatabaseError as exc:
            raise click.ClickException(db.describe_error(self.database_url, exc)) from None
        except migrate.SchemaError as exc:
            raise click.ClickException(str(exc)) from None
        finally:
            database.dispose()


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


@main.group()
def db_group() -> None:
    """Manage the state store's schema."""


main.add_command(db_group, name="db")


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
    if output == "json":
        click.echo(json.dumps({"revision": current, "latest": migrate.head_revision()}))
    else:
        click.echo(f"database at revision {current}")


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
    if output == "json":
        click.echo(json.dumps({"revision": current, "latest": migrate.head_revision()}))
    else:
        click.echo(f"database at revision {current}")


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


@main.group()
def state() -> None:
    """Inspect the persisted pod-to-instance mapping."""


@state.command("show")
@output_option
@click.option("--namespace", "-n", default=None, help="Only pods of this namespace.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Include pods whose instance is terminated or that failed.",
)
@click.pass_obj
def state_show(obj: CliContext, output: str, namespace: str | None, show_all: bool) -> None:
    """Print the mapping table: one row per managed pod.

    Under the table: the spend RunPod charged, each namespace's use against its caps, the
    instances that only look like ours, and the Instant Clusters of Indexed Jobs. JSON has
    `spend_usd` per row, look-alikes as rows with state `unowned-lookalike`, and clusters
    as rows with state `cluster-<state>`. A --database-url naming a SQLite file that
    does not exist is an error, not a new empty database.
    """
    with obj.database(must_exist=True) as database:
        require_schema(database)
        with db.session_factory(database)() as session:
            rows = queries.mappings(session, namespace, include_finished=show_all)
            tick = queries.last_tick(session)
            every_row = queries.mappings(session, namespace)
            lines = queries.spend_lines(session)
            budgets = [
                b for b in queries.namespace_budgets(session) if namespace in (None, b.namespace)
            ]
            unowned = [
                u for u in queries.unowned_instances(session) if namespace in (None, u.namespace)
            ]
            billed_until = queries.billing_covered_until(session)
            clusters = queries.clusters(session, namespace)
    spent: dict[str, float] = defaultdict(float)
    for line in lines:
        if namespace in (None, line.namespace):
            spent[line.instance_id] += line.usd
    gpus = state_view.gpu_utilization_of(tick)
    if output == "json":
        records = [
            {
                **state_view.mapping_record(r, gpus.get(f"{r.namespace}/{r.name}")),
                "spend_usd": round(spent.get(r.instance_id or "", 0.0), 2),
            }
            for r in rows
        ]
        records += [state_view.unowned_record(u) for u in unowned]
        records += [state_view.cluster_record(c) for c in clusters]
        click.echo(json.dumps(records, indent=2))
        return
    now = datetime.now(UTC)
    click.echo(state_view.render_table([state_view.table_row(r, now) for r in rows]))
    click.echo("")
    for text in state_view.money_lines(every_row, spent, budgets, unowned, billed_until):
        click.echo(escaped(text))
    for text in state_view.gpu_lines(gpus, rows):
        click.echo(escaped(text))
    for text in state_view.cluster_lines(clusters, now):
        click.echo(escaped(text))
    if tick is not None:
        click.echo(
            f"last tick #{tick.id}: {state_view.format_age(tick.started_at, now)} ago, "
            f"{tick.actions_applied} applied, {tick.actions_failed} failed"
        )


@main.command()
@click.option(
    "--since",
    default=None,
    metavar="D",
    help="Only charges from then on: a duration (30m, 24h, 7d) or an ISO date.",
)
@click.option(
    "--by",
    "by",
    type=click.Choice(cost_view.GROUPS),
    default="pod",
    help="Group the charges by pod (and claim and Job, for network volumes and Instant "
    "Clusters), namespace, or GPU type (and storage type).",
)
@output_option
@click.pass_obj
def cost(obj: CliContext, since: str | None, by: str, output: str) -> None:
    """What RunPod charged for our instances, network volumes and Instant Clusters (its
    billing, read hourly by the reconciler; this command sends RunPod nothing).

    JSON has `total_usd` and one row per group with its `usd` and, but by namespace, its
    `kind` (pod, network-volume or cluster); `billed_until` is how far the pods' billing
    was read, `billed_until_by_kind` the network volumes' and clusters'. Charges nothing
    maps to a pod, claim or Job are one `(unmapped)` row per kind. Per pod, a charge
    more than 10% away from list price times the instance's life is flagged
    (`mismatch`). `leaked_network_volumes` lists the volumes of ours that no PV or
    claim uses, as the reconciler's last tick found them; `charged_but_gone` the ids
    RunPod charged in the last hour read that it neither lists nor answers for, whoever's
    they were (found without the database's journal).
    """
    now = datetime.now(UTC)
    try:
        start = cost_view.parse_since(since, now) if since is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None
    with obj.database(must_exist=True) as database:
        require_schema(database)
        with db.session_factory(database)() as session:
            pod_lines = queries.spend_lines(session, start)
            lines = cost_view.charges(pod_lines, queries.resource_spend_lines(session, start))
            mappings = queries.mappings(session)
            billed_until = queries.billing_covered_until(session)
            reaches = {
                kind: queries.billing_covered_until(session, kind)
                for kind in cost_view.RESOURCE_KINDS
            }
            leaks = cost_view.leaked_volumes(queries.leaked_volumes(session))
            ghosts = cost_view.charged_gone(queries.charged_gone(session))
    rows = cost_view.group(lines, by)
    if by == "pod" and start is None:
        cost_view.flag_mismatches(rows, mappings, pod_lines, billed_until)
    if output == "json":
        shown = cost_view.record(rows, by, start, billed_until)
        shown["billed_until_by_kind"] = {
            kind: until.isoformat() if until else None for kind, until in reaches.items()
        }
        shown["leaked_network_volumes"] = leaks
        shown["charged_but_gone"] = ghosts
        click.echo(json.dumps(shown, indent=2))
        return
    click.echo(state_view.render_table(cost_view.table(rows, by), cost_view.header(by)))
    total = sum(row.usd for row in rows)
    until = f"{billed_until:%Y-%m-%d %H:%M} UTC" if billed_until else "never read yet"
    others = "".join(
        f", {kind}s through {reach:%Y-%m-%d %H:%M} UTC"
        for kind, reach in reaches.items()
        if reach is not None
    )
    click.echo(f"\ntotal ${total:.2f} (RunPod billing: pods through {until}{others})")
    for line in [*cost_view.leak_lines(leaks), *cost_view.charged_gone_lines(ghosts)]:
        click.echo(line)


def require_schema(database: Database) -> None:
    if migrate.current_revision(database) is None:
        raise click.ClickException("the database has no schema yet; run `reconciler db upgrade`")


def _require_latest_schema(obj: CliContext) -> None:
    """A dry run does not migrate: the database must exist and be at the latest schema."""
    with obj.database(must_exist=True) as database:
        current, head = migrate.current_revision(database), migrate.head_revision()
    if current != head:
        raise click.ClickException(
            f"the database schema is at {current or 'nothing'}, not the latest ({head}); "
            "a dry run changes nothing, so run `reconciler db upgrade` first"
        )


@main.command()
@click.option("--once", is_flag=True, help="Run one tick and exit (the CronJob mode).")
@click.option("--dry-run", is_flag=True, help="With --once: print the plan, change nothing.")
@output_option
@kubeconfig_option
@context_option
@runpod_url_option
@runpod_api_key_option
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
    help="Namespace of the leader Lease [default: the pod's own, else "
    f"{leader.FALLBACK_NAMESPACE}].",
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
        leader_namespace=leader_elect_namespace or leader.default_namespace(),
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
        settings = dataclasses.replace(settings, kubelet_port=0)
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


main.add_command(logs_command)
main.add_command(exec_command)
main.add_command(offers_command)


@main.command()
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
@kubeconfig_option
@context_option
@runpod_url_option
@runpod_api_key_option
@settings_options
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
                    check_no_reconciler(kube, settings.node_name, utcnow())
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


def _with_ssh_key(settings: Settings) -> Settings:
    """The settings with the public half of `--ssh-key-file` (made if missing)."""
    if not settings.ssh_key_file:
        return settings
    try:
        identity = load_identity(settings.ssh_key_file)
    except SshKeyError as exc:
        raise click.ClickException(str(exc)) from None
    return dataclasses.replace(settings, ssh_public_key=identity.public_line)


def _run_once(
    obj: CliContext,
    settings: Settings,
    conn: Connections,
    dry_run: bool,
    output: str,
    stay: float,
    heartbeat_interval: float,
) -> bool:
    """One tick under the writer lock, its summary, then the stay (runtime/cronjob_run.py). A
    dry run only reads: no migration and no lock, so it also works beside a running loop.
    Whether it all worked: the tick observed both worlds and no heartbeat failed."""
    if dry_run:
        _require_latest_schema(obj)
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
