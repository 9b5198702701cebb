"""Reads and writes of the state store, each in its own short transaction.

No transaction is held open around an HTTP call (docs/architecture.md §2). The
executor's row and journal writes go through a `WriteBatch` (`batch()`), which commits
them in few transactions at the points the protocol of docs/architecture.md §4 needs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.batch import WriteBatch
from reconciler.adapters.store.models import (
    ActionRecord,
    BilledResource,
    BillingRead,
    CatalogCopy,
    ClusterRow,
    GoneBilled,
    HostKey,
    ListedVolume,
    Lock,
    Mapping,
    NamespaceBudget,
    PodLog,
    ResourceList,
    ResourceSpendRecord,
    SpendRecord,
    Tick,
    UnownedInstance,
)
from reconciler.core.cluster_record import ClusterRecord
from reconciler.core.domain import (
    Availability,
    BillingRecord,
    CpuFlavor,
    DataCenterStock,
    GpuType,
    ResourceCharge,
    RunPodVolume,
)
from reconciler.core.mapping import MappingRecord
from reconciler.core.money.attribution import Attribution, Billed
from reconciler.core.money.ghost_charges import GhostCharge, Gone
from reconciler.core.money.namespace_caps import NamespaceCaps
from reconciler.core.pods.ownership import Lookalike
from reconciler.core.resources.volume_leaks import KnownVolume

_FIELDS = [f.name for f in dataclasses.fields(MappingRecord)]
_LOAD_ROWS = select(*(Mapping.__table__.c[name] for name in _FIELDS))
_POD_BILLING = "pods"
_VOLUME_LIST = "network-volumes"
_CHARGE_AUDIT = "ghost-charges"
# A tick row keeps the first errors; the log has them all.
MAX_TICK_ERRORS = 20


@dataclass(frozen=True)
class TickSummary:
    """What the row of a finished tick records, for `state show` and post-mortems."""

    started_at: datetime
    finished_at: datetime
    pods_seen: int
    instances_seen: int
    actions_planned: int
    actions_applied: int
    actions_failed: int
    errors: tuple[str, ...] = ()
    gpu_utilization: dict[str, list[float]] = field(default_factory=dict)
    """Per pod ("<namespace>/<pod>"), each GPU's utilization, 0-1."""


class Store:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    # --- mappings ---------------------------------------------------------------

    def load_rows(self) -> list[MappingRecord]:
        # Core, not the ORM, and the columns in the record's field order: at 10 000 rows
        # the ORM's loading and a dict per row cost 60 % more CPU (docs, Performance).
        with self._sessions() as session:
            return [MappingRecord(*row) for row in session.connection().execute(_LOAD_ROWS)]

    def batch(self) -> WriteBatch:
        """Row and journal writes to commit together (see `reconciler.adapters.store.batch`)."""
        return WriteBatch(self._sessions)

    def save_row(self, record: MappingRecord) -> None:
        """One row, committed at once."""
        batch = self.batch()
        batch.save_row(record)
        batch.commit()

    def delete_row(self, pod_uid: str) -> None:
        batch = self.batch()
        batch.delete_row(pod_uid)
        batch.commit()

    def row(self, pod_uid: str) -> MappingRecord | None:
        with self._sessions() as session:
            found = session.get(Mapping, pod_uid)
            if found is None:
                return None
            return MappingRecord(**{f: getattr(found, f) for f in _FIELDS})

    # --- gangs' clusters ----------------------------------------------------------

    def load_clusters(self) -> list[ClusterRecord]:
        names = [f.name for f in dataclasses.fields(ClusterRecord)]
        with self._sessions() as session:
            return [
                ClusterRecord(**{name: getattr(row, name) for name in names})
                for row in session.scalars(select(ClusterRow))
            ]

    # --- pod logs kept after the end ---------------------------------------------

    def save_log(
        self,
        pod_uid: str,
        instance_id: str | None,
        lines: Sequence[tuple[datetime, str]],
        truncated: bool,
        now: datetime,
    ) -> bool:
        """Keep these lines for the pod; False when its row is gone (nothing to keep)."""
        text = json.dumps([[ts.isoformat(), line] for ts, line in lines])
        with self._sessions.begin() as session:
            if session.get(Mapping, pod_uid) is None:
                return False
            session.merge(
                PodLog(
                    pod_uid=pod_uid,
                    instance_id=instance_id,
                    lines=text,
                    truncated=truncated,
                    saved_at=now,
                )
            )
        return True

    def saved_log(self, pod_uid: str) -> list[tuple[datetime, str]] | None:
        with self._sessions() as session:
            found = session.get(PodLog, pod_uid)
            if found is None:
                return None
            return [(datetime.fromisoformat(ts), line) for ts, line in json.loads(found.lines)]

    def has_saved_log(self, pod_uid: str) -> bool:
        with self._sessions() as session:
            return session.get(PodLog, pod_uid) is not None

    # --- billing ------------------------------------------------------------------

    def billing_covered_until(self) -> datetime | None:
        with self._sessions() as session:
            read = session.get(BillingRead, _POD_BILLING)
            return None if read is None else read.covered_until

    def save_billing(
        self,
        records: Sequence[BillingRecord],
        covered_until: datetime,
        now: datetime,
        forget_before: datetime,
    ) -> None:
        """Store one read's records and how far it reached; drop what history lets go."""
        with self._sessions.begin() as session:
            for record in records:
                session.merge(
                    SpendRecord(
                        instance_id=record.instance_id,
                        bucket_start=record.start,
                        bucket_end=record.end,
                        total_usd=record.total_usd,
                        gpu_usd=record.gpu_usd,
                        disk_usd=record.disk_usd,
                    )
                )
            session.merge(BillingRead(name=_POD_BILLING, covered_until=covered_until, read_at=now))
            session.execute(delete(SpendRecord).where(SpendRecord.bucket_end < forget_before))

    def spend_by_instance(self) -> dict[str, float]:
        with self._sessions() as session:
            result = session.execute(
                select(SpendRecord.instance_id, func.sum(SpendRecord.total_usd)).group_by(
                    SpendRecord.instance_id
                )
            )
            return {instance_id: float(total) for instance_id, total in result}

    # --- network volumes of ours as last listed -----------------------------------------

    def volume_list(self) -> tuple[datetime | None, list[KnownVolume]]:
        """When RunPod's volumes were last listed (None: never, in this database) and
        the volumes of ours that list showed."""
        with self._sessions() as session:
            read = session.get(ResourceList, _VOLUME_LIST)
            rows = session.scalars(select(ListedVolume).order_by(ListedVolume.volume_id))
            known = [
                KnownVolume(
                    RunPodVolume(row.volume_id, row.name, row.size_gb, row.datacenter, row.type),
                    row.first_listed_at,
                    row.leaked_since,
                )
                for row in rows
            ]
            return (None if read is None else read.listed_at), known

    def save_volume_list(self, ours: Sequence[RunPodVolume], now: datetime) -> None:
        """Keep a complete list's volumes of ours in place of the last one's (each keeps
        when a list first showed it)."""
        with self._sessions.begin() as session:
            kept = {row.volume_id: row for row in session.scalars(select(ListedVolume))}
            for volume_id, row in kept.items():
                if volume_id not in {v.id for v in ours}:
                    session.delete(row)
            for volume in ours:
                row = kept.get(volume.id) or ListedVolume(volume_id=volume.id, first_listed_at=now)
                session.add(row)
                row.name, row.size_gb, row.type = volume.name, volume.size_gb, volume.type
                row.datacenter = volume.datacenter
            session.merge(ResourceList(name=_VOLUME_LIST, listed_at=now))

    def forget_listed_volume(self, volume_id: str) -> None:
        """A volume RunPod deleted: the kept list no longer shows it."""
        with self._sessions.begin() as session:
            session.execute(delete(ListedVolume).where(ListedVolume.volume_id == volume_id))

    def mark_volume_leaks(self, leaked: Sequence[str], now: datetime) -> None:
        """Which kept volumes the audit found leaked (for `reconciler cost`); written
        only when that changes."""
        with self._sessions.begin() as session:
            for row in session.scalars(select(ListedVolume)):
                if row.volume_id in leaked and row.leaked_since is None:
                    row.leaked_since = now
                elif row.volume_id not in leaked and row.leaked_since is not None:
                    row.leaked_since = None

    # --- ids billed but gone --------------------------------------------------------------

    def charge_audit_at(self) -> datetime | None:
        with self._sessions() as session:
            read = session.get(ResourceList, _CHARGE_AUDIT)
            return None if read is None else read.listed_at

    def touch_charge_audit(self, now: datetime) -> None:
        """An audit that failed: the next is due in the next hour, not on every tick."""
        with self._sessions.begin() as session:
            session.merge(ResourceList(name=_CHARGE_AUDIT, listed_at=now))

    def gone_billed(self) -> list[Gone]:
        with self._sessions() as session:
            rows = session.scalars(select(GoneBilled).order_by(GoneBilled.resource_id))
            return [Gone(row.kind, row.resource_id, row.gone_since) for row in rows]

    def ghost_charges(self) -> list[GhostCharge]:
        """The ghost charges the last audit found (told on every tick until it clears)."""
        with self._sessions() as session:
            query = select(GoneBilled).where(GoneBilled.charged_usd.is_not(None))
            return [
                GhostCharge(
                    row.kind, row.resource_id, row.charged_usd or 0.0, row.gone_since, row.named_by
                )
                for row in session.scalars(query.order_by(GoneBilled.resource_id))
            ]

    def save_charge_audit(
        self, gone: Sequence[Gone], ghosts: Sequence[GhostCharge], now: datetime
    ) -> None:
        """One audit's outcome in place of the last one's: the ids billed and gone now
        (an id billed no more, or found again, is forgotten), and their ghost charges."""
        told = {(g.kind, g.resource_id): g for g in ghosts}
        with self._sessions.begin() as session:
            session.execute(delete(GoneBilled))
            for item in gone:
                ghost = told.get((item.kind, item.resource_id))
                session.add(
                    GoneBilled(
                        kind=item.kind,
                        resource_id=item.resource_id,
                        gone_since=item.since,
                        charged_usd=None if ghost is None else ghost.usd,
                        named_by=None if ghost is None else ghost.named_by,
                    )
                )
            session.merge(ResourceList(name=_CHARGE_AUDIT, listed_at=now))

    # --- network volumes' and clusters' charges -----------------------------------------

    def save_attributions(self, found: Sequence[Attribution], now: datetime) -> None:
        """Whose these resources are (each written as found: the caller writes only news)."""
        with self._sessions.begin() as session:
            for item in found:
                session.merge(
                    BilledResource(
                        kind=item.kind.value,
                        resource_id=item.resource_id,
                        namespace=item.namespace,
                        name=item.name,
                        owner_uid=item.owner_uid,
                        detail=item.detail,
                        updated_at=now,
                    )
                )

    def attributions(
        self, kind: Billed, ids: Sequence[str]
    ) -> dict[str, tuple[Attribution, datetime]]:
        """What is written of these resources (by id), with when it was written."""
        with self._sessions() as session:
            query = (
                select(BilledResource)
                .where(BilledResource.kind == kind.value)
                .where(BilledResource.resource_id.in_(list(ids)))
            )
            return {
                row.resource_id: (
                    Attribution(
                        kind, row.resource_id, row.namespace, row.name, row.owner_uid, row.detail
                    ),
                    row.updated_at,
                )
                for row in session.scalars(query)
            }

    def clusters_deleted(self) -> dict[str, datetime]:
        """Cluster id → when RunPod last answered its DELETE (from the journal)."""
        with self._sessions() as session:
            query = (
                select(ActionRecord.instance_id, func.max(ActionRecord.finished_at))
                .where(ActionRecord.kind == "delete-cluster")
                .where(ActionRecord.outcome == "ok")
                .where(ActionRecord.instance_id.is_not(None))
                .group_by(ActionRecord.instance_id)
            )
            return {str(i): at for i, at in session.execute(query) if at is not None}

    def billed_resource_ids(self, kind: Billed) -> set[str]:
        with self._sessions() as session:
            query = select(BilledResource.resource_id).where(BilledResource.kind == kind.value)
            return set(session.scalars(query))

    def resource_billing_covered_until(self, kind: Billed) -> datetime | None:
        with self._sessions() as session:
            read = session.get(BillingRead, kind.value)
            return None if read is None else read.covered_until

    def save_resource_billing(
        self,
        kind: Billed,
        records: Sequence[ResourceCharge],
        covered_until: datetime,
        now: datetime,
        forget_before: datetime,
    ) -> None:
        """Store one read's records and how far it reached; drop what history lets go:
        charges older than it, and whose-rows not seen since with no charge left."""
        with self._sessions.begin() as session:
            for record in records:
                session.merge(
                    ResourceSpendRecord(
                        kind=kind.value,
                        resource_id=record.resource_id,
                        bucket_start=record.start,
                        bucket_end=record.end,
                        total_usd=record.total_usd,
                    )
                )
            session.merge(BillingRead(name=kind.value, covered_until=covered_until, read_at=now))
            session.execute(
                delete(ResourceSpendRecord)
                .where(ResourceSpendRecord.kind == kind.value)
                .where(ResourceSpendRecord.bucket_end < forget_before)
            )
            charged = select(ResourceSpendRecord.resource_id).where(
                ResourceSpendRecord.kind == kind.value
            )
            session.execute(
                delete(BilledResource)
                .where(BilledResource.kind == kind.value)
                .where(BilledResource.updated_at < forget_before)
                .where(BilledResource.resource_id.not_in(charged))
            )

    # --- namespace budgets and look-alikes --------------------------------------------

    def save_namespace_caps(self, caps: Sequence[NamespaceCaps], now: datetime) -> None:
        """Remember the caps `state show` shows; writes only what changed."""
        with self._sessions.begin() as session:
            for cap in caps:
                known = session.get(NamespaceBudget, cap.namespace)
                values = (cap.max_hourly_spend, cap.max_instances, cap.error)
                if (
                    known is not None
                    and (known.max_hourly_spend, known.max_instances, known.error) == values
                ):
                    continue
                if cap.empty:
                    if known is not None:
                        session.delete(known)
                    continue
                session.merge(
                    NamespaceBudget(
                        namespace=cap.namespace,
                        max_hourly_spend=values[0],
                        max_instances=values[1],
                        error=values[2],
                        updated_at=now,
                    )
                )

    def sync_lookalikes(self, found: Sequence[Lookalike], now: datetime) -> None:
        """Keep the look-alike list equal to this tick's; writes only on a change."""
        with self._sessions.begin() as session:
            known = {row.instance_id: row for row in session.scalars(select(UnownedInstance))}
            wanted = {item.instance_id: item for item in found}
            for instance_id in known.keys() - wanted.keys():
                session.delete(known[instance_id])
            for instance_id in wanted.keys() - known.keys():
                item = wanted[instance_id]
                session.add(
                    UnownedInstance(
                        instance_id=instance_id,
                        name=item.name,
                        namespace=item.namespace,
                        pod_name=item.pod_name,
                        first_seen_at=now,
                    )
                )

    # --- ticks and the journal ----------------------------------------------------

    def open_tick(self, started_at: datetime) -> int:
        """The row of a tick in progress, for its journal entries to point at; its id."""
        with self._sessions.begin() as session:
            tick = Tick(started_at=started_at)
            session.add(tick)
            session.flush()
            return tick.id

    def record_tick(self, summary: TickSummary, tick_id: int | None = None) -> int:
        """Write a finished tick's row (the one `open_tick` gave, if any); its id."""
        row = Tick(
            id=tick_id,
            started_at=summary.started_at,
            finished_at=summary.finished_at,
            pods_seen=summary.pods_seen,
            instances_seen=summary.instances_seen,
            actions_planned=summary.actions_planned,
            actions_applied=summary.actions_applied,
            actions_failed=summary.actions_failed,
            dry_run=False,
            error_summary="\n".join(summary.errors[:MAX_TICK_ERRORS]) or None,
            gpu_utilization=json.dumps(summary.gpu_utilization)
            if summary.gpu_utilization
            else None,
        )
        with self._sessions.begin() as session:
            merged = session.merge(row)
            session.flush()
            return merged.id

    def journal(self, tick_id: int | None = None) -> Sequence[ActionRecord]:
        with self._sessions() as session:
            query = select(ActionRecord).order_by(ActionRecord.id)
            if tick_id is not None:
                query = query.where(ActionRecord.tick_id == tick_id)
            return list(session.scalars(query))

    # --- the writer lock ----------------------------------------------------------

    def acquire_lock(
        self, name: str, owner: str, ttl: float, now: datetime, dead_holder: str | None = None
    ) -> str | None:
        """Take or renew the lock; returns None on success, else the current holder.

        `dead_holder` names a holder known to be dead, whose lock may be taken at once.
        """
        expires = now + timedelta(seconds=ttl)
        with self._sessions.begin() as session:
            # A conditional UPDATE is atomic: it only wins when the lock is ours or stale.
            stale = (Lock.owner == owner) | (Lock.expires_at < now)
            if dead_holder is not None:
                stale = stale | (Lock.owner == dead_holder)
            taken = session.execute(
                update(Lock)
                .where(Lock.name == name)
                .where(stale)
                .values(owner=owner, acquired_at=now, expires_at=expires)
            )
            if taken.rowcount:  # type: ignore[attr-defined]
                return None
            holder = session.get(Lock, name)
            if holder is not None:
                return holder.owner
        try:
            with self._sessions.begin() as session:
                session.add(Lock(name=name, owner=owner, acquired_at=now, expires_at=expires))
            return None
        except IntegrityError:
            return self.acquire_lock(name, owner, ttl, now, dead_holder)

    def release_lock(self, name: str, owner: str) -> None:
        with self._sessions.begin() as session:
            session.execute(delete(Lock).where(Lock.name == name).where(Lock.owner == owner))

    def remember_host_key(self, instance_id: str, key: str, now: datetime) -> str:
        """The host key first seen for the instance: `key` if none was yet (it is kept
        then), else the one kept, which a concurrent first contact may have written."""
        with self._sessions() as session:
            known = session.get(HostKey, instance_id)
            if known is not None:
                return known.key
        try:
            with self._sessions.begin() as session:
                session.add(HostKey(instance_id=instance_id, key=key, first_seen_at=now))
            return key
        except IntegrityError:
            return self.remember_host_key(instance_id, key, now)

    # --- catalogs -----------------------------------------------------------------

    def save_catalog(self, entries: Sequence[GpuType | CpuFlavor], now: datetime) -> None:
        """Keep a fetched catalog (GPU types or CPU flavors) for `reconciler offers`."""
        kind = _catalog_kind(entries)
        if kind is None:
            return
        text = json.dumps([dataclasses.asdict(entry) for entry in entries])
        with self._sessions.begin() as session:
            session.merge(CatalogCopy(kind=kind, fetched_at=now, entries=text))

    def load_catalog(self, kind: str) -> tuple[list[GpuType | CpuFlavor], datetime] | None:
        """The catalog of `kind` (`gpu` or `cpu`) as last kept, and when it was fetched."""
        with self._sessions() as session:
            row = session.get(CatalogCopy, kind)
            if row is None:
                return None
            made: type[GpuType | CpuFlavor] = GpuType if kind == "gpu" else CpuFlavor
            entries = [made(**_with_stock(entry)) for entry in json.loads(row.entries)]
            return entries, row.fetched_at


def _catalog_kind(entries: Sequence[GpuType | CpuFlavor]) -> str | None:
    if not entries:
        return None  # an empty answer is a failed fetch's look: the last copy stays
    return "gpu" if isinstance(entries[0], GpuType) else "cpu"


def _with_stock(entry: dict[str, Any]) -> dict[str, Any]:
    """A catalog entry's JSON with its stock levels as the domain's values again."""
    datacenters = entry.get("datacenters") or []
    return {
        **entry,
        "availability": Availability(int(entry.get("availability") or 0)),
        "datacenters": tuple(
            DataCenterStock(str(dc["id"]), Availability(int(dc["availability"])))
            for dc in datacenters
        ),
    }
