"""Charges nobody would be told of otherwise: RunPod bills an id that it neither lists
nor answers for (docs/architecture.md §3, Money).

The other billing audits tell ours by the database (an instance's row, a cluster's
DELETE in the journal, whose each volume is), so a lost database hides such a charge.
This audit needs none of it: once an hour it reads the last whole hour of the three
billing routes and watches each id charged that the tick's lists do not show, from that
moment. A watched id charged for an hour that began at or after it is read by id, and
RunPod's 404 (for an instance, also its TERMINATED record) makes it a ghost charge,
whoever's it was: told on every tick (log, metric, `reconciler cost`) while RunPod bills
it, with the Kubernetes object that names the id, if one does (a pod's
`runpod.io/pod-id`, a gang pod's `runpod.io/cluster-id`, a PV's volume handle). Those
names say where to look, never whose it is: nothing is deleted on them. A resource that
simply ended is never read: it is charged for no hour after it left the list.

The one fact kept is since when each id is watched, in the store; a lost database costs
an hour's delay (watched again from the next audit), never the report: a ghost is told
by the second audit after it left the list, two to three hours later.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.domain import KubeObject
from reconciler.core.money.attribution import Billed
from reconciler.core.pods.podinfo import POD_ID_ANNOTATION
from reconciler.core.resources.clusters import CLUSTER_ID

AUDIT_PERIOD = timedelta(hours=1)


POD = "pod"
"""The kind of an instance's charge, as `reconciler cost` names it; a network volume's
and a cluster's are `Billed`'s values."""
VOLUME, CLUSTER = Billed.NETWORK_VOLUME.value, Billed.CLUSTER.value


@dataclass(frozen=True)
class Charge:
    kind: str
    resource_id: str
    start: datetime
    usd: float


@dataclass(frozen=True)
class Gone:
    """An id RunPod charged that its list did not show, watched since when."""

    kind: str
    resource_id: str
    since: datetime


@dataclass(frozen=True)
class GhostCharge:
    kind: str
    resource_id: str
    usd: float
    """Charged in the last whole hour read, which began after it was found gone."""
    gone_since: datetime
    named_by: str | None
    """The Kubernetes object that names the id ("pod ns/name", "PV name"), if any."""

    def message(self) -> str:
        named = f"; {self.named_by} names it" if self.named_by else "; nothing names it"
        return (
            f"RunPod charged ${self.usd:.2f} for {self.kind} {self.resource_id} in the last "
            f"hour, though it neither lists it nor answers for it since "
            f"{self.gone_since.isoformat()}{named}: ask RunPod to stop the charge"
        )


def hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def due(last: datetime | None, now: datetime) -> bool:
    """Once per clock hour (a new hour of billing has ended since the last audit)."""
    return last is None or hour(now) > hour(last)


def overdue(last: datetime | None, now: datetime) -> bool:
    """An audit put off (RunPod's quota not ample) for three hours runs anyway."""
    return last is not None and now - last >= 3 * AUDIT_PERIOD


def window(now: datetime) -> tuple[datetime, datetime]:
    """The last whole hour."""
    end = hour(now)
    return end - AUDIT_PERIOD, end


def unlisted(charges: Iterable[Charge], shown: Mapping[str, set[str]]) -> list[Gone]:
    """The ids charged that the lists do not show, `since` unset (the caller's now)."""
    found = {(c.kind, c.resource_id) for c in charges if c.usd > 0}
    return [
        Gone(kind, resource_id, datetime.min)
        for kind, resource_id in sorted(found)
        if resource_id not in shown.get(kind, set())
    ]


def ghosts(
    charges: Iterable[Charge], gone: Sequence[Gone], named: Mapping[tuple[str, str], str]
) -> list[GhostCharge]:
    """Watched ids charged for an hour that began at or after they were first
    watched: ghost charges once RunPod does not answer for them."""
    since = {(g.kind, g.resource_id): g.since for g in gone}
    usd: dict[tuple[str, str], float] = defaultdict(float)
    for charge in charges:
        key = (charge.kind, charge.resource_id)
        if key in since and charge.usd > 0 and charge.start >= since[key]:
            usd[key] += charge.usd
    return [
        GhostCharge(
            kind,
            resource_id,
            usd[(kind, resource_id)],
            since[(kind, resource_id)],
            named.get((kind, resource_id)),
        )
        for kind, resource_id in sorted(usd)
    ]


def names(pods: Iterable[KubeObject], volumes: Iterable[KubeObject]) -> dict[tuple[str, str], str]:
    """Which Kubernetes object names each id: pods by their instance's or cluster's
    annotation, PVs by their volume handle."""
    found: dict[tuple[str, str], str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        where = f"pod {meta.get('namespace', 'default')}/{meta.get('name', '?')}"
        if annotations.get(POD_ID_ANNOTATION):
            found.setdefault((POD, annotations[POD_ID_ANNOTATION]), where)
        if annotations.get(CLUSTER_ID):
            found.setdefault((CLUSTER, annotations[CLUSTER_ID]), where)
    for pv in volumes:
        handle = ((pv.get("spec") or {}).get("csi") or {}).get("volumeHandle")
        if handle:
            found.setdefault((VOLUME, str(handle)), f"PV {pv['metadata']['name']}")
    return found
