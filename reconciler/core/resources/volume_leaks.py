"""Network volumes of ours that nothing uses (docs/architecture.md §3, "Network
volumes"): told on every tick, counted in the spend caps, and collected when the claim
they were made for is bound to another volume.

RunPod's volume list is read only on ticks whose decisions need it, plus once an hour
(`LIST_PERIOD`) for this audit; the volumes of ours it showed are kept with the rest of
our state (the store), so every tick, `sync --once` runs too, tells the leaks from the
most recent list and the PVs and claims it reads anyway: no request of its own on a
steady tick. A database without a list (new, or lost) lists once. The kept list is no
proof a volume still exists: a leak first told from it is read by id once
(`to_confirm`), and a 404 forgets it.

A leak is a volume named as ours (`volume_objects.volume_name`) that no PV names and
no claim waits for. When its claim is live and bound to another volume, it is a
duplicate (a POST whose answer was lost, another reconciler that took the claim over):
no pod ever mounted it (pods mount what a PV names), so once it has been listed for the
orphan grace and no instance mounts it, it is deleted, as a duplicate instance is. The
grace counts from when the bound volume's PV was made, by Kubernetes' record, if that is
earlier than the first list the database kept (a database lost on every run keeps none).
Otherwise (its claim gone: a Retained volume whose PV someone deleted, say) it is kept,
and reported on every tick: data is never deleted on a guess. Another owner's volume is
never a leak of ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from reconciler.core.actions import DeleteNetworkVolume
from reconciler.core.domain import RunPodVolume
from reconciler.core.pods.podinfo import parse_time
from reconciler.core.resources.network_volumes import leaks
from reconciler.core.resources.storage_prices import hourly_usd
from reconciler.core.resources.volume_objects import StorageView, claim_uid_of, mounted

LIST_PERIOD = timedelta(hours=1)
"""How stale the kept list may get before a tick lists volumes for the audit alone."""


@dataclass(frozen=True)
class KnownVolume:
    """A volume of ours as the most recent list showed it."""

    volume: RunPodVolume
    first_listed_at: datetime
    leaked_since: datetime | None = None
    """Set while the last audit found it leaked: a new process counts it in the caps
    before its own audit ran."""


@dataclass(frozen=True)
class VolumeLeak:
    volume: RunPodVolume
    since: datetime
    """When a list first showed it."""
    duplicate: bool
    """Its claim is bound to another volume: it is collected after the grace."""

    @property
    def hourly_usd(self) -> float:
        return hourly_usd(self.volume.size_gb, self.volume.type)

    def why(self) -> str:
        if self.duplicate:
            return "a duplicate: its claim is bound to another volume; deleted after the grace"
        return "its claim is gone; kept (data is never deleted on a guess): delete it if unneeded"


def hourly_usd_leaked(known: Sequence[KnownVolume]) -> float:
    """What the volumes the last audit found leaked cost per hour."""
    return sum(hourly_usd(k.volume.size_gb, k.volume.type) for k in known if k.leaked_since)


def list_due(listed_at: datetime | None, now: datetime) -> bool:
    """Whether the kept list is too old (or missing) to tell leaks from."""
    return listed_at is None or now - listed_at >= LIST_PERIOD


def ours(listed: Sequence[RunPodVolume], owner_id: str) -> list[RunPodVolume]:
    return [v for v in listed if claim_uid_of(v, owner_id) is not None]


def found(known: Sequence[KnownVolume], view: StorageView) -> list[VolumeLeak]:
    """The leaks among the volumes the most recent list showed, told by the PVs and
    claims of this tick."""
    first = {k.volume.id: k.first_listed_at for k in known}
    bound = _bound_since(view)
    leaked = leaks(replace(view, listed=[k.volume for k in known]))
    found_leaks: list[VolumeLeak] = []
    for volume in leaked:
        claim = claim_uid_of(volume, view.owner_id)
        duplicate = claim in bound
        since = first[volume.id]
        if duplicate:
            # No create for a claim follows its binding: the duplicate was made before
            # the bound volume's PV, by Kubernetes' own record, which a lost database
            # keeps (a fresh database would count from its own first list on every run).
            since = min(since, bound[claim] or since)
        found_leaks.append(VolumeLeak(volume, since, duplicate))
    return found_leaks


def _bound_since(view: StorageView) -> dict[str | None, datetime | None]:
    """By claim UID, for each claim bound to a volume: when that volume's PV was made
    (None when the PV is not read)."""
    made = {
        pv["metadata"]["name"]: parse_time(pv["metadata"].get("creationTimestamp"))
        for pv in view.volumes
    }
    return {
        c["metadata"]["uid"]: made.get(c["spec"]["volumeName"])
        for c in view.claims
        if c.get("spec", {}).get("volumeName")
    }


def to_confirm(
    found_leaks: Sequence[VolumeLeak], known: Sequence[KnownVolume], view: StorageView
) -> list[str]:
    """The leaks told from the kept list (not this tick's) that no audit told before:
    each is read by id first, since the volume may have gone since that list (deleted
    by another process, or by a tick that crashed before the list forgot it); only a
    404 lets it go. One GET per new leak; none on the ticks after."""
    listed = {v.id for v in view.listed or ()}
    told = {k.volume.id for k in known if k.leaked_since is not None}
    return [
        leak.volume.id
        for leak in found_leaks
        if leak.volume.id not in listed and leak.volume.id not in told
    ]


def collect(
    found_leaks: Sequence[VolumeLeak], view: StorageView, now: datetime, grace: float
) -> list[DeleteNetworkVolume]:
    """Delete each duplicate listed for longer than the grace that no instance mounts
    (RunPod would refuse; a later tick tries again)."""
    return [
        DeleteNetworkVolume(leak.volume.id, None)
        for leak in found_leaks
        if leak.duplicate
        and now - leak.since >= timedelta(seconds=grace)
        and not mounted(leak.volume.id, view.instances)
    ]
