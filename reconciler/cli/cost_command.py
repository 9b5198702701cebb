"""`reconciler cost`: what RunPod charged for our instances, network volumes and
Instant Clusters, as the reconciler read its billing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from reconciler.adapters.store import db, queries
from reconciler.cli import cost_view, state_view
from reconciler.cli.context import CliContext, require_schema
from reconciler.cli.output import output_option


@click.command()
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
    was read, `billed_until_by_kind` the network volumes', clusters' and any other billed
    kind's. Charges nothing
    maps to a pod, claim or Job are one `(unmapped)` row per kind. Per pod, a charge
    more than 10% away from list price times the instance's life is flagged
    (`mismatch`). `leaked_network_volumes` lists the volumes of ours that no PV or
    claim uses, as the reconciler's last tick found them; `charged_but_gone` the ids
    RunPod charged in the last hour read that it neither lists nor answers for, whoever's
    they were (found without the database's journal). `unbilled_list_usd` (and
    `unbilled_list_usd_by_pod`) is list price times the part of each instance's life the
    billing read has not covered yet: an estimate, marked so, of what no charge shows
    yet (a pod of the last minutes has none before the next hourly read).
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
            reaches = cost_view.resource_reaches(queries.billing_reaches(session))
            leaks = cost_view.leaked_volumes(queries.leaked_volumes(session))
            ghosts = cost_view.charged_gone(queries.charged_gone(session))
    estimate = cost_view.unbilled(mappings, billed_until, now, start)
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
        shown["unbilled_list_usd"] = round(sum(estimate.values()), 4)
        shown["unbilled_list_usd_by_pod"] = {pod: round(usd, 4) for pod, usd in estimate.items()}
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
    for line in [
        *cost_view.unbilled_lines(estimate),
        *cost_view.leak_lines(leaks),
        *cost_view.charged_gone_lines(ghosts),
    ]:
        click.echo(line)
