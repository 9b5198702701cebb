"""What RunPod billed, as read hour by hour: per instance, and per network volume or
cluster."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    BilledResource,
    BillingCoverage,
    ResourceSpendRecord,
    SpendRecord,
)
from reconciler.core.domain import (
    BillingRecord,
    ResourceCharge,
)

_POD_BILLING = "pods"


class Billing:
    """The billing records read, and how far each read reached."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def covered_until(self) -> datetime | None:
        return self._read_until(_POD_BILLING)

    def save(
        self,
        records: Sequence[BillingRecord],
        covered_until: datetime,
        now: datetime,
        forget_before: datetime,
    ) -> None:
        """Store one read's records and how far it reached; drop what history lets go."""
        rows = [
            SpendRecord(
                instance_id=record.instance_id,
                bucket_start=record.start,
                bucket_end=record.end,
                total_usd=record.total_usd,
                gpu_usd=record.gpu_usd,
                disk_usd=record.disk_usd,
            )
            for record in records
        ]
        with self._sessions.begin() as session:
            _save_read(session, _POD_BILLING, rows, covered_until, now)
            session.execute(delete(SpendRecord).where(SpendRecord.bucket_end < forget_before))

    def spend_by_instance(self) -> dict[str, float]:
        with self._sessions() as session:
            result = session.execute(
                select(SpendRecord.instance_id, func.sum(SpendRecord.total_usd)).group_by(
                    SpendRecord.instance_id
                )
            )
            return {instance_id: float(total) for instance_id, total in result}

    def resource_ids(self, kind: str) -> set[str]:
        """`kind`: a `Billed` value, or another resource's billing kind."""
        with self._sessions() as session:
            query = select(BilledResource.resource_id).where(BilledResource.kind == str(kind))
            return set(session.scalars(query))

    def resource_covered_until(self, kind: str) -> datetime | None:
        return self._read_until(str(kind))

    def save_resources(
        self,
        kind: str,
        records: Sequence[ResourceCharge],
        covered_until: datetime,
        now: datetime,
        forget_before: datetime,
    ) -> None:
        """Store one read's records and how far it reached; drop what history lets go:
        charges older than it, and whose-rows not seen since with no charge left."""
        rows = [
            ResourceSpendRecord(
                kind=str(kind),
                resource_id=record.resource_id,
                bucket_start=record.start,
                bucket_end=record.end,
                total_usd=record.total_usd,
            )
            for record in records
        ]
        with self._sessions.begin() as session:
            _save_read(session, str(kind), rows, covered_until, now)
            session.execute(
                delete(ResourceSpendRecord)
                .where(ResourceSpendRecord.kind == str(kind))
                .where(ResourceSpendRecord.bucket_end < forget_before)
            )
            charged = select(ResourceSpendRecord.resource_id).where(
                ResourceSpendRecord.kind == str(kind)
            )
            session.execute(
                delete(BilledResource)
                .where(BilledResource.kind == str(kind))
                .where(BilledResource.updated_at < forget_before)
                .where(BilledResource.resource_id.not_in(charged))
            )

    def _read_until(self, name: str) -> datetime | None:
        with self._sessions() as session:
            read = session.get(BillingCoverage, name)
            return None if read is None else read.covered_until


def _save_read(
    session: Session,
    name: str,
    rows: Sequence[SpendRecord | ResourceSpendRecord],
    covered_until: datetime,
    now: datetime,
) -> None:
    """One read of billing `name`: its hourly rows (merged: a later read of the same hour
    replaces it) and how far it reached, in the caller's transaction."""
    for row in rows:
        session.merge(row)
    session.merge(BillingCoverage(name=name, covered_until=covered_until, read_at=now))
