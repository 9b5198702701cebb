"""Writer Leases: at most one reconciler acts for a node at a time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.adapters.kube.errors import KubeConflict
from reconciler.adapters.kube.transport import LEASES, KubeTransport, lease_object, micro_time, q
from reconciler.core.domain import KubeObject

CREATES_HELD_ANNOTATION = "runpod.io/creates-held-until"
"""On a writer Lease: no holder starts a create before this time (RunPod's time). An
earlier writer may have made an instance that RunPod does not list yet and that no pod
names: a dead holder's last create (its successor holds creates for the create grace,
and passes the rest on here), or the creates a writer released the Lease without
recording on their pods. Kept in the Lease so that every successor within the hold
honours it, however many short runs follow each other."""


@dataclass(frozen=True)
class LeaseAcquisition:
    """The outcome of one try for a Lease; true when won."""

    won: bool
    taken_over_from: str | None = None
    """The holder whose lease had expired when we took it (it stopped renewing)."""
    holder: str | None = None
    """Who holds it when we did not win (None when even a read after a lost race found
    nobody: the winner released it at once)."""
    creates_held_until: datetime | None = None
    """Until when the holder may start no create (`CREATES_HELD_ANNOTATION`), as a writer
    before us passed it on (on RunPod's time: compared by the holder); None if none."""

    def __bool__(self) -> bool:
        return self.won


class Leases:
    """Acquiring, renewing and releasing a Lease."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def try_acquire(
        self,
        namespace: str,
        name: str,
        identity: str,
        duration_seconds: int,
        now: datetime,
        *,
        dead_holder: str | None = None,
    ) -> LeaseAcquisition:
        """Acquire (free, expired or ours) or renew the Lease; not won if someone else holds
        a valid one or won the race (a 409 on our resourceVersion-guarded write).

        `dead_holder` names a holder known to be dead (a process of this host that no
        longer runs): its Lease is taken as if it had expired."""
        collection = LEASES.format(namespace=q(namespace))
        lease = self._kube.get_optional(f"{collection}/{q(name)}")
        stamp = micro_time(now)
        ours = {
            "holderIdentity": identity,
            "leaseDurationSeconds": duration_seconds,
            "renewTime": stamp,
        }
        try:
            if lease is None:
                first = {**ours, "acquireTime": stamp, "leaseTransitions": 0}
                self._kube.request("POST", collection, body=lease_object(namespace, name, first))
                return LeaseAcquisition(won=True)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            if (
                holder
                and holder != identity
                and holder != dead_holder
                and not _lease_expired(spec, now)
            ):
                return LeaseAcquisition(won=False, holder=holder)
            held = _creates_held_until(lease)
            if holder != identity:
                ours.update(
                    acquireTime=stamp, leaseTransitions=int(spec.get("leaseTransitions") or 0) + 1
                )
            lease["spec"] = {**spec, **ours}
            self._kube.request("PUT", f"{collection}/{q(name)}", body=lease)
            return LeaseAcquisition(
                won=True,
                taken_over_from=holder if holder != identity else None,
                creates_held_until=held,
            )
        except KubeConflict:
            # Another writer wrote the Lease between our read and our write: one more
            # read names it, so a refused writer can say who acts.
            winner = self._kube.get_optional(f"{collection}/{q(name)}") or {}
            return LeaseAcquisition(
                won=False, holder=(winner.get("spec") or {}).get("holderIdentity")
            )

    def release(
        self, namespace: str, name: str, identity: str, hold_creates_until: datetime | None = None
    ) -> None:
        """Give the Lease up at once (if still ours), so a successor need not wait it out.
        A hold on creates in it stays; `hold_creates_until` extends it."""
        path = f"{LEASES.format(namespace=q(namespace))}/{q(name)}"
        lease = self._kube.get_optional(path)
        spec = (lease or {}).get("spec") or {}
        if lease is None or spec.get("holderIdentity") != identity:
            return
        now = self._kube.now()
        if hold_creates_until is not None:
            _hold_creates(lease, hold_creates_until)
        spec.pop("holderIdentity")
        spec.update(leaseDurationSeconds=1, renewTime=micro_time(now))
        try:
            self._kube.request("PUT", path, body=lease)
        except KubeConflict:
            return  # someone else wrote it meanwhile: it is no longer ours to release


def _creates_held_until(lease: KubeObject) -> datetime | None:
    """The hold in the Lease, as written: its writer's time is RunPod's, so the holder
    compares it with that, not with this host's clock (`runtime/process/writer_lease.py`)."""
    value = ((lease.get("metadata") or {}).get("annotations") or {}).get(CREATES_HELD_ANNOTATION)
    try:
        return datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


def _hold_creates(lease: KubeObject, until: datetime | None) -> datetime | None:
    """Extend the Lease's hold on creates to `until` (a hold never shortens); the hold."""
    held = _creates_held_until(lease)
    if until is None or (held is not None and held >= until):
        return held
    annotations = lease.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[CREATES_HELD_ANNOTATION] = micro_time(until)
    return until


def _lease_expired(spec: dict[str, Any], now: datetime) -> bool:
    term_end = _lease_term_end(spec)
    return term_end is None or now >= term_end


def _lease_term_end(spec: dict[str, Any]) -> datetime | None:
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    if not renewed:
        return None
    duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))
    return datetime.fromisoformat(renewed) + duration
