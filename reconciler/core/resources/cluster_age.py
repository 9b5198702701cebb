"""A cluster's age, for its graces (the create grace of a second cluster for one gang,
the orphan grace of a cluster no gang of ours runs): counted from when RunPod made it,
its members' `createdAt`; when no member shows one (RunPod's contract requires it, a
broken answer may still leave it out or garble it), from when a list of ours first showed
the cluster, as kept in the store (`adapters/store/listed_clusters.py`), so that neither
a restart nor a `sync --once` run starts the count again; and with no such record yet,
from now: this is its first sighting.

Either way the age is on the graces' clock (RunPod's served time, docs/architecture.md
§4, "Clocks"). An unknown age is never taken as old: the cluster may be another writer's,
just made, that our rows do not know yet; nor as forever young: it would bill forever."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from reconciler.core.domain import Instance


def made(members: Iterable[Instance]) -> datetime | None:
    """When RunPod made the cluster, by its members' records (None: none says)."""
    return min((m.created_at for m in members if m.created_at), default=None)


def undated(members: Iterable[Instance], owner_id: str) -> set[str]:
    """Our clusters in the list of which no member shows when it was made."""
    by_cluster: dict[str, list[Instance]] = {}
    for member in members:
        if member.cluster_id is not None and member.owner == owner_id:
            by_cluster.setdefault(member.cluster_id, []).append(member)
    return {cid for cid, listed in by_cluster.items() if made(listed) is None}


def past_grace(
    now: datetime,
    members: Sequence[Instance],
    first_listed: Mapping[str, datetime],
    seconds: float,
) -> bool:
    """Whether the cluster of these members (one cluster's) is `seconds` old."""
    cluster_id = members[0].cluster_id if members else None
    since = made(members) or first_listed.get(str(cluster_id)) or now
    return now - since >= timedelta(seconds=seconds)
