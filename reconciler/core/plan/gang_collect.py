"""Collecting gangs' clusters and rows (docs/architecture.md §3, "Instant Clusters"):
a cluster of ours whose Job has no pod on the node, a row no gang needs any more, a
deleted cluster's row once RunPod answered 404 for it by id."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from reconciler.core.actions import Action, DeleteClusterRow, SaveClusterRow
from reconciler.core.cluster_row import ClusterRow, ClusterState
from reconciler.core.domain import Instance
from reconciler.core.plan import gang_end
from reconciler.core.plan.situation import Situation
from reconciler.core.reasons import TerminateReason
from reconciler.core.resources import cluster_age
from reconciler.core.resources.clusters import gone_rows, key_job


def collect(
    tick: Situation,
    members: Mapping[str, Sequence[Instance]],
    rows: Mapping[str, ClusterRow],
    jobs: tuple[Collection[str], Collection[str]],
    current: set[str],
) -> list[Action]:
    """Clusters of ours whose Job has no pod on the node: deleted after the orphan grace
    (a create's pods may be read a moment after its members are listed); rows of gangs
    that are no Job's gang now and have no cluster listed, forgotten once no create of
    theirs can be in doubt; rows of clusters RunPod said are gone, forgotten once no pod
    of their Job stays. `jobs`: the Jobs with pods on the node, and those of them with a
    pod not being deleted."""
    on_node, staying = jobs
    actions: list[Action] = []
    forgotten, gone = gone_rows(rows.values(), tick.obs.clusters_gone, staying)
    actions += [DeleteClusterRow(gang) for gang in forgotten]
    actions += [SaveClusterRow(row.changed(updated_at=tick.now)) for row in gone]
    done = {*forgotten, *(g for g, row in rows.items() if row.state is ClusterState.GONE)}
    for gang, listed in members.items():
        if key_job(gang) in on_node:
            continue
        grace = tick.settings.timing.orphan_grace_time
        if not cluster_age.past_grace(tick.now, listed, tick.obs.clusters_first_listed, grace):
            continue
        detail = "no pod of its Job is left on the node"
        actions += gang_end.delete(
            tick, listed[0].cluster_id, rows.get(gang), detail, (), TerminateReason.ORPHAN
        )
    for gang, row in rows.items():
        if gang in members or gang in current or gang in done:
            continue
        since = row.attempt_started_at if row.state is ClusterState.CREATING else row.updated_at
        if not tick.within(
            since, tick.settings.timing.create_grace_time + tick.settings.timing.orphan_grace_time
        ):
            actions.append(DeleteClusterRow(gang))
    return actions
