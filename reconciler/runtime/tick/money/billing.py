"""Billing for the money chore (`runtime/tick/chores/money.py`): billing reads, who owns
each billed resource, and namespace caps.

Each costs RunPod or Kubernetes requests, so each runs only when it can change something:
- billing: one `GET /v2/billing/pods` when a whole hour has ended since the last read
  (the read's reach is kept in the database, so restarts and `--once` runs share it);
  a pod's charge found to differ from list price is told from that same read (no
  request of its own);
- namespace caps: one `GET /api/v1/namespaces/{ns}` per namespace of a pod waiting for
  a create, cached for `CAPS_TTL`;
- network volumes' and Instant Clusters' charges: one `GET /v2/billing/network-volumes`
  and one `GET /v2/billing/clusters` when a whole hour has ended since the last read,
  each only while a resource of its kind is known as ours (within `--cost-history`); a
  cluster charged for an hour that began after its DELETE was answered is a leak, and
  is deleted again (one `DELETE /v2/clusters/{id}`);
- whose each billed resource is (`Attributions`) is written when the tick first sees it
  (and once a day while it does), from what the tick lists anyway: no request;
- every record these reads get, anyone's, is handed to the hourly ghost-charge audit
  (`runtime/tick/money/charge_audit.py`), which then does not ask for the same hour again.
(Registry credentials are collected by their own resource, `runtime/tick/resources/registries.py`.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.actions import Action
from reconciler.core.config import Settings
from reconciler.core.domain import BillingRecord, ResourceCharge
from reconciler.core.mapping import MappingRow
from reconciler.core.money import charges
from reconciler.core.money.attribution import Attribution, Billed
from reconciler.core.money.namespace_caps import NamespaceCaps, caps_from_annotations
from reconciler.core.plan.observation import Observation
from reconciler.core.resources.clusters import UnrunCluster, leaked

log = logging.getLogger(__name__)

BILLING_PERIOD = timedelta(hours=1)
CAPS_TTL = timedelta(seconds=60)


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class BillingRead:
    records: Sequence[BillingRecord] = ()
    """Our instances' charges in the hours read this tick."""
    spend_by_pod: dict[str, float] = field(default_factory=dict)
    """USD so far by pod UID, with this read; empty when nothing was read."""
    covered_until: datetime | None = None
    """How far the read reached; None when nothing was read."""
    differences: Sequence[charges.PriceDifference] = ()
    """Pods whose charge differs from list price since this read (not before it)."""
    since: datetime | None = None
    charged: Sequence[BillingRecord] = ()
    """Every record read, anyone's: the ghost-charge audit uses it instead of asking
    for the same hour again (`runtime/tick/money/charge_audit.py`)."""


def read_billing(
    runpod: RunPodClient,
    store: Store,
    settings: Settings,
    rows: Sequence[MappingRow],
    now: datetime,
) -> BillingRead:
    """Read the whole hours that ended since the last read, at most once an hour.

    Only ended hours are read, so no bucket is read twice and a charge is counted once.
    Nothing is written here (observation is read-only): `save_billing` records the read
    once the tick applies, and a tick that never gets there reads the same hours again.
    """
    ours = {row.instance_id for row in rows if row.instance_id}
    if not ours:
        return BillingRead()  # nothing of ours to map a charge to: spare the request
    until = _hour(now)
    covered = store.billing.covered_until()
    since = covered or _hour(now - timedelta(days=settings.caps.cost_history_days))
    if until - since < BILLING_PERIOD:
        return BillingRead()
    try:
        records = runpod.billing.instances(since, until)
    except runpod_errors.RunPodError as exc:
        log.warning("could not read RunPod billing: %s", exc)
        return BillingRead()
    kept = [r for r in records if r.instance_id in ours]
    before = store.billing.spend_by_instance()
    per_instance = dict(before)
    for instance_id, usd in charges.by_instance(kept).items():
        per_instance[instance_id] = per_instance.get(instance_id, 0.0) + usd
    log.info(
        "read RunPod billing %s..%s: %d records of our instances, $%.2f",
        since.isoformat(),
        until.isoformat(),
        len(kept),
        sum(r.total_usd for r in kept),
    )
    by_pod = charges.spend_by_pod(per_instance, rows)
    differences = charges.new_differences(
        rows, charges.spend_by_pod(before, rows), covered, by_pod, until
    )
    for difference in differences:
        row = difference.row
        log.warning("%s/%s: %s", row.namespace, row.name, difference.message())
    return BillingRead(kept, by_pod, until, differences, since, records)


def save_billing(store: Store, settings: Settings, read: BillingRead, now: datetime) -> None:
    if read.covered_until is not None:
        store.billing.save(
            read.records,
            read.covered_until,
            now,
            forget_before=now - timedelta(days=settings.caps.cost_history_days),
        )


def _no_leaks(kept: Sequence[ResourceCharge]) -> Sequence[Action]:
    return ()


@dataclass(frozen=True)
class Audit:
    """How the hourly ghost-charge audit (`runtime/tick/money/charge_audit.py`) checks the
    ids of a billed kind charged for an hour: which ids RunPod lists now, and a read of
    one by id."""

    listed: Callable[[Observation], set[str]]
    """The ids of the kind RunPod lists now (asked only when one of it was charged)."""
    read: Callable[[str], object]
    """A read by id, raising `RunPodNotFound` when RunPod has it no more."""


@dataclass(frozen=True)
class BillingRoute:
    """How a resource billed apart from instances is charged (its `Resource.billing`):
    RunPod's billing endpoint for its kind, and what a charge of ours may prove."""

    kind: str
    """Its rows in the billing tables (`Billed`'s value for the built-in kinds)."""
    read: Callable[[datetime, datetime], Sequence[ResourceCharge]]
    """Every charge of the kind in whole hours [since, until): one request."""
    leaks: Callable[[Sequence[ResourceCharge]], Sequence[Action]] = _no_leaks
    """The actions our charges prove due (a cluster billed after its DELETE: deleted
    again), run after the pods' actions; logged by the route."""
    creates: tuple[type[Action], ...] = ()
    """Its actions that make something billed by the hour: a tick that plans one is busy,
    and the ghost-charge audit waits (the create's reads come first)."""
    audit: Audit | None = None
    """How the ghost-charge audit checks its charged ids (None: it is not audited)."""


@dataclass(frozen=True)
class ResourceBillingRead:
    kind: str
    records: Sequence[ResourceCharge]
    """Charges of our resources of this kind in the hours read."""
    covered_until: datetime
    leaks: Sequence[Action] = ()
    """What the charges proved due (clusters charged for hours after RunPod answered
    their DELETE: deleted again)."""
    since: datetime | None = None
    charged: Sequence[ResourceCharge] = ()
    """Every record read, anyone's (for the ghost-charge audit, as `BillingRead`'s)."""


class ResourceBilling:
    """The charges of resources billed apart from instances (network volumes', Instant
    Clusters', each resource's `billing` route), read like the pods' (whole hours that
    ended since the last read, at most once an hour per kind) and kept only for
    resources known as ours. When the next read is due is kept in memory, so that the
    ticks in between do not even ask the database."""

    def __init__(self) -> None:
        self._due: dict[str, datetime] = {}

    def read(
        self, routes: Sequence[BillingRoute], store: Store, settings: Settings, now: datetime
    ) -> list[ResourceBillingRead]:
        """Volumes' before clusters', as they always were read; another kind's after."""
        reads = []
        for route in sorted(routes, key=route_order):
            kind = route.kind
            due = self._due.get(kind)
            if due is not None and now < due:
                continue
            # Whatever comes of it, the next try is in the next hour: a failed read
            # loses nothing (the next one starts where the last stored one ended).
            self._due[kind] = _hour(now) + BILLING_PERIOD
            found = self._read(route, store, settings, now)
            if found is not None:
                reads.append(found)
        return reads

    @staticmethod
    def _read(
        route: BillingRoute, store: Store, settings: Settings, now: datetime
    ) -> ResourceBillingRead | None:
        kind = route.kind
        ours = store.billing.resource_ids(kind)
        if not ours:
            return None  # nothing of ours to attribute a charge to: spare the request
        until = _hour(now)
        covered = store.billing.resource_covered_until(kind)
        since = covered or _hour(now - timedelta(days=settings.caps.cost_history_days))
        if until - since < BILLING_PERIOD:
            return None
        try:
            records = route.read(since, until)
        except runpod_errors.RunPodError as exc:
            log.warning("could not read RunPod's %s billing: %s", kind, exc)
            return None
        kept = [r for r in records if r.resource_id in ours]
        log.info(
            "read RunPod %s billing %s..%s: %d records of ours, $%.2f",
            kind,
            since.isoformat(),
            until.isoformat(),
            len(kept),
            sum(r.total_usd for r in kept),
        )
        leaks = route.leaks(kept) if kept else ()
        return ResourceBillingRead(kind, kept, until, leaks, since, records)


def route_order(route: BillingRoute) -> int:
    """Volumes' before clusters', as they always were read; another kind's after."""
    order = [kind.value for kind in Billed]
    return order.index(route.kind) if route.kind in order else len(order)


def save_resource_billing(
    store: Store, settings: Settings, reads: Sequence[ResourceBillingRead], now: datetime
) -> None:
    for read in reads:
        store.billing.save_resources(
            read.kind,
            read.records,
            read.covered_until,
            now,
            forget_before=now - timedelta(days=settings.caps.cost_history_days),
        )


class Attributions:
    """Whose each network volume and cluster of ours is, written to the store only when
    new or changed, and once a day while it is seen (which keeps it from being
    forgotten with the cost history while it lives). What was written is remembered, so
    a process that runs many ticks asks the database only about resources it has not
    written yet; one that runs one tick (`sync --once`) reads them and writes nothing
    that is already there."""

    def __init__(self) -> None:
        self._written: dict[tuple[str, str], tuple[Attribution, datetime]] = {}

    def save(self, store: Store, found: Iterable[Attribution], now: datetime) -> None:
        news = [item for item in found if not self._fresh(item, now)]
        for kind in dict.fromkeys(item.kind for item in news):
            unknown = [i.resource_id for i in news if i.kind == kind]
            if unknown:
                for resource_id, known in store.attributions.read(kind, unknown).items():
                    self._written[(kind, resource_id)] = known
        news = [item for item in news if not self._fresh(item, now)]
        if not news:
            return
        store.attributions.save(news, now)
        for item in news:
            self._written[(item.kind, item.resource_id)] = (item, now)

    def _fresh(self, item: Attribution, now: datetime) -> bool:
        known = self._written.get((item.kind, item.resource_id))
        return known is not None and known[0] == item and now - known[1] < timedelta(days=1)


def audit_clusters(
    unrun: Sequence[UnrunCluster],
    grace_seconds: float,
    now: datetime,
    deleting: Iterable[str | None] = (),
) -> list[UnrunCluster]:
    """The leak audit of Instant Clusters (`clusters.leaked`): a cluster of ours that no
    Job's gang on the node runs, made longer than the orphan grace ago by RunPod's own
    record, and that we are not deleting (`deleting`), is a leak, logged as an error on
    every tick it stays. Nothing is kept in memory: a `sync --once` CronJob reports as
    the loop does."""
    found = leaked(unrun, grace_seconds, now, deleting)
    for cluster in found:
        log.error(
            "LEAK: Instant Cluster %s (%d members, $%.2f/h) is ours but no gang of a "
            "Job on the node runs it, %.0f s after RunPod made it; %s",
            cluster.cluster_id,
            cluster.members,
            cluster.cost_per_hr,
            cluster.unrun_for(now),
            "nothing deletes it"
            if cluster.gang
            else "it has no gang tag, so it is left alone: delete it at RunPod if unneeded",
        )
    return found


class NamespaceCapsCache:
    """Budget caps of namespaces, read from their annotations and kept for CAPS_TTL."""

    def __init__(self) -> None:
        self._caps: dict[str, tuple[datetime, NamespaceCaps]] = {}
        self._unsaved: list[NamespaceCaps] = []

    def get(
        self, kube: KubeClient, namespaces: Iterable[str], now: datetime
    ) -> dict[str, NamespaceCaps]:
        for namespace in sorted(set(namespaces)):
            cached = self._caps.get(namespace)
            if cached is not None and now - cached[0] < CAPS_TTL:
                continue
            try:
                annotations = kube.cluster.namespace_annotations(namespace) or {}
            except kube_errors.KubeError as exc:
                log.warning("could not read the budget of namespace %s: %s", namespace, exc)
                continue
            caps = caps_from_annotations(namespace, annotations)
            self._caps[namespace] = (now, caps)
            self._unsaved.append(caps)
        return {ns: caps for ns, (_, caps) in self._caps.items()}

    def save(self, store: Store, now: datetime) -> None:
        """Record what was read for `state show` (the store writes only changes).

        Taken off the list before the write: caps that failed to save are not tried on
        every tick (the next read after CAPS_TTL brings them back)."""
        unsaved, self._unsaved = self._unsaved, []
        if unsaved:
            store.namespaces.save_caps(unsaved, now)
