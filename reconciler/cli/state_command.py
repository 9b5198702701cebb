"""`reconciler state show`: the persisted pod-to-instance mapping, with spend, caps,
look-alikes and Instant Clusters under it."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime

import click

from reconciler.adapters.store import db, queries
from reconciler.cli import state_view
from reconciler.cli.context import CliContext, require_schema
from reconciler.cli.output import output_option
from reconciler.core.printable import escaped


@click.group()
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
