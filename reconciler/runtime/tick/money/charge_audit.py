"""The ghost-charge audit's requests (`core.money.ghost_charges` decides): once an hour, the
last whole hour of the pods' billing and of each billing route that says how it is
audited (`billing.BillingRoute.audit`: the built-in network volumes' and clusters'), and
a read by id of each id charged for an hour after the lists stopped showing it
(`runtime/tick/by_id.py`); nothing of it needs the database but when it last ran and
since when each id is known gone.

Cost per hour with the built-in resources: `GET /v2/billing/pods`,
`/v2/billing/network-volumes` and `/v2/billing/clusters` (3 requests; none for a route
this tick's own billing read covered), `GET /v2/network-volumes` when volumes were
charged (1), and one GET by id per id charged for an hour after no list showed it (a
ghost, or a list lagging for over an hour): none for a resource that simply ended.
The ticks in between ask RunPod nothing for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.domain import InstanceStatus
from reconciler.core.money import ghost_charges
from reconciler.core.money.ghost_charges import POD, VOLUME, Charge, GhostCharge
from reconciler.core.plan.observation import Observation
from reconciler.runtime.tick.by_id import read_by_id
from reconciler.runtime.tick.money.billing import (
    Audit,
    BillingRead,
    BillingRoute,
    ResourceBillingRead,
    route_order,
)

log = logging.getLogger(__name__)


def audited(routes: Sequence[BillingRoute]) -> list[BillingRoute]:
    """The billing routes the audit reads besides the pods' (those that say how), in the
    order they are read."""
    return sorted((r for r in routes if r.audit is not None), key=route_order)


def audit(
    runpod: RunPodClient,
    kube: KubeClient,
    store: Store,
    observation: Observation,
    read: tuple[Sequence[Charge], set[str]],
    now: datetime,
    routes: Sequence[BillingRoute],
    *,
    quiet: bool = True,
) -> list[GhostCharge]:
    """The ghost charges to tell this tick: found now when the audit is due, else as the
    last audit found them. `read`: the charges this tick's other billing reads got for
    the audit's hour, anyone's, and the routes they covered (not asked again). A due audit
    waits for a `quiet` tick with RunPod's quota ample (work that can wait), for three
    hours at most. `routes`: the resources' billing routes (`audited`)."""
    last = store.charge_audit.at()
    if ghost_charges.due(last, now) and (
        (quiet and runpod.quota_ample(extra=3)) or ghost_charges.overdue(last, now)
    ):
        try:
            _run(runpod, kube, store, observation, read, now, audited(routes))
        except Exception as exc:  # derived data, never the tick's actions: next hour again
            log.warning("could not audit RunPod's charges: %s", exc)
            store.charge_audit.touch(now)
    found = store.charge_audit.ghost_charges()
    for ghost in found:
        log.error("CHARGED BUT GONE: %s", ghost.message())
    return found


def charges_read(
    billing: BillingRead,
    others: Sequence[ResourceBillingRead],
    now: datetime,
    routes: Sequence[BillingRoute],
) -> tuple[list[Charge], set[str]]:
    """What this tick's ownership-gated billing reads got for the audit's hour, as the
    audit's charges, and the routes they covered whole (not asked again)."""
    start, end = ghost_charges.window(now)
    kinds = {route.kind for route in audited(routes)}
    found: list[Charge] = []
    covered: set[str] = set()
    if _covers(billing.since, billing.covered_until, start, end):
        covered.add(POD)
        found += [
            Charge(POD, r.instance_id, r.start, r.total_usd)
            for r in billing.charged
            if start <= r.start < end
        ]
    for other in others:
        if other.kind not in kinds:
            continue  # a kind whose resources the audit cannot read by id
        if _covers(other.since, other.covered_until, start, end):
            covered.add(other.kind)
            found += [
                Charge(other.kind, r.resource_id, r.start, r.total_usd)
                for r in other.charged
                if start <= r.start < end
            ]
    return found, covered


def _covers(since: datetime | None, until: datetime | None, start: datetime, end: datetime) -> bool:
    return since is not None and until is not None and since <= start and until >= end


def _run(
    runpod: RunPodClient,
    kube: KubeClient,
    store: Store,
    observation: Observation,
    read: tuple[Sequence[Charge], set[str]],
    now: datetime,
    routes: Sequence[BillingRoute],
) -> None:
    start, end = ghost_charges.window(now)
    charges, have = list(read[0]), read[1]
    if POD not in have:
        charges += [
            Charge(POD, r.instance_id, r.start, r.total_usd)
            for r in runpod.billing.instances(start, end)
        ]
    audits: dict[str, Audit] = {}
    for route in routes:
        assert route.audit is not None
        audits[route.kind] = route.audit
        if route.kind not in have:
            charges += [
                Charge(route.kind, r.resource_id, r.start, r.total_usd)
                for r in route.read(start, end)
            ]
    shown = {POD: {i.id for i in (*observation.instances, *observation.members)}}
    for kind, how in audits.items():
        if any(c.kind == kind for c in charges):
            shown[kind] = how.listed(observation)
    # An id charged that no list shows is watched from now on; once it is charged for
    # an hour that began after that, it is read by id, and told if RunPod has it no more
    # (a GET only then: not for every resource that simply ended last hour).
    known = {(g.kind, g.resource_id): g for g in store.charge_audit.gone_billed()}
    watched = [
        known.get((s.kind, s.resource_id)) or replace(s, since=now)
        for s in ghost_charges.unlisted(charges, shown)
    ]
    pvs = kube.storage.list_volumes() if any(g.kind == VOLUME for g in watched) else []
    named = ghost_charges.names([*observation.pods, *observation.gang_pods], pvs)
    candidates = ghost_charges.ghosts(charges, watched, named)
    alive = {
        (g.kind, g.resource_id)
        for g in candidates
        if not _gone(runpod, audits, g.kind, g.resource_id)
    }
    store.charge_audit.save(
        [g for g in watched if (g.kind, g.resource_id) not in alive],
        [g for g in candidates if (g.kind, g.resource_id) not in alive],
        now,
    )


def _gone(runpod: RunPodClient, audits: dict[str, Audit], kind: str, resource_id: str) -> bool:
    """Whether RunPod answers 404 for the id (an instance: or its TERMINATED record)."""
    read: Callable[[str], Any] = runpod.instances.get if kind == POD else audits[kind].read
    answer = read_by_id([resource_id], read)
    if answer.gone:
        return True
    found: Sequence[Any] = answer.found
    return kind == POD and found[0].status is InstanceStatus.TERMINATED
