"""What already costs money per hour, for the caps a create is admitted against: our
instances (a create in doubt counts as an instance), the members of our Instant
Clusters (a cluster of N pods is N instances at N times the member's price; one whose
create is in doubt at the price it was tried at), and our network volumes' storage; in
all and per namespace (docs/architecture.md §3, Money).

Counted once per plan, from what the tick has anyway (RunPod's one list, the rows, the
PVs the provisioner read): no request of its own. The single pods admitted and the gang
created in one plan are charged to the same count, so neither sees room the other took.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.core.actions import PodRef
from reconciler.core.cluster_row import ClusterState
from reconciler.core.domain import ClusterRequest, KubeObject
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.money.hourly_cap import within_cap
from reconciler.core.money.namespace_caps import Spent
from reconciler.core.plan.situation import Situation, ownership_of
from reconciler.core.pods import podinfo
from reconciler.core.resources import clusters, storage_prices


def spent(tick: Situation) -> Spent:
    """What runs now, and what this plan admitted so far."""
    if tick.spent is None:
        tick.spent = _running(tick)
    return tick.spent


def _running(tick: Situation) -> Spent:
    obs, owner = tick.obs, tick.settings.owner_id
    pods = {podinfo.uid(p): p for p in obs.pods if podinfo.is_ours_to_run(p)}
    rows = {row.pod_uid: row for row in obs.rows}
    owned = ownership_of(obs, owner).owned
    total = Spent()
    for uid, group in owned.items():
        usd = sum(storage_prices.instance_hourly(i) for i in group)  # with its disks
        total.add(_namespace_of(uid, rows, pods), len(group), usd)
    for row in rows.values():
        if (
            row.state is MappingState.CREATING
            and row.pod_uid not in owned
            and tick.within(row.attempt_started_at, tick.settings.timing.create_grace_time)
        ):
            total.add(row.namespace, 1, 0.0)  # its price is not known until it is listed
    jobs = _job_namespaces(tick)
    listed = clusters.members_by_gang(obs.members, owner)
    for gang, members in listed.items():
        namespace = jobs.get(clusters.key_job(gang))
        total.add(namespace, len(members), sum(storage_prices.instance_hourly(m) for m in members))
    for cluster in obs.clusters:
        if (
            cluster.state is ClusterState.CREATING
            and cluster.gang not in listed
            and tick.within(cluster.attempt_started_at, tick.settings.timing.create_grace_time)
        ):
            total.add(cluster.namespace, cluster.pod_count, cluster.cost_per_hr or 0.0)
    for namespace, usd in obs.standing_spend.items():
        total.add(namespace, 0, usd)
    return total


def _namespace_of(
    uid: str, rows: Mapping[str, MappingRow], pods: Mapping[str, KubeObject]
) -> str | None:
    if uid in pods:
        return PodRef.of(pods[uid]).namespace
    row = rows.get(uid)
    return row.namespace if row is not None and row.namespace else None


def _job_namespaces(tick: Situation) -> dict[str, str]:
    """Job UID → namespace, for the gangs' clusters: from their rows, else their pods."""
    found = {row.job_uid: row.namespace for row in tick.obs.clusters}
    for pod in tick.obs.gang_pods:
        job = clusters.job_uid(pod)
        if job is not None:
            found.setdefault(job, PodRef.of(pod).namespace)
    return found


def admit_cluster(
    tick: Situation, namespace: str, candidates: Sequence[ClusterRequest], size: int
) -> tuple[tuple[ClusterRequest, ...], str | None]:
    """The candidates a cluster of `size` pods may be created as within the caps (and
    the cluster charged), or none and why."""
    total = spent(tick)
    use = total.use(namespace)
    caps = tick.obs.namespace_caps.get(namespace)
    limit = tick.settings.caps.max_instances
    if total.instances + size > limit:
        return (), (
            f"waiting for budget: a cluster of {size} pods would pass --max-instances "
            f"({limit}; {total.instances} running)"
        )
    affordable = tuple(
        c
        for c in candidates
        if within_cap(total.hourly_spend + c.hourly_price, tick.settings.caps.max_hourly_spend)
        and use.refusal(caps, c.hourly_price, size) is None
    )
    cheapest = min(c.hourly_price for c in candidates)
    refusal = use.refusal(caps, cheapest, size)
    if refusal is not None:
        return (), f"waiting for budget: {refusal}"
    if not affordable:
        return (), (
            f"waiting for budget: ${total.hourly_spend:.2f}/h of "
            f"${tick.settings.caps.max_hourly_spend:.2f}/h spent, this cluster of {size} pods "
            f"needs at least ${cheapest:.2f}/h"
        )
    # Count the dearest candidate tried: RunPod may accept any of them.
    total.add(namespace, size, max(c.hourly_price for c in affordable))
    return affordable, None
