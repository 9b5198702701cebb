"""What RunPod billed, as read hour by hour: per instance, and per network volume or
cluster."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    BilledResource,
    BillingRead,
    ResourceSpendRecord,
    SpendRecord,
)
from reconciler.core.domain import (
    BillingRecord,
    ResourceCharge,
)
from reconciler.core.money.attribution import Billed

_POD_BILLING = "pods"


class Billing:
    """The billing records read, and how far each read reached."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def covered_until(self) -> datetime | None:
        with self._sessions() as session:
            read = session.get(BillingRead, _POD_BILLING)
            return None if read is None else read.covered_until

    def save(
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

    def resource_ids(self, kind: Billed) -> set[str]:
        with self._sessions() as session:
            query = select(BilledResource.resource_id).where(BilledResource.kind == kind.value)
            return set(session.scalars(query))

    def resource_covered_until(self, kind: Billed) -> datetime | None:
        with self._sessions() as session:
            read = session.get(BillingRead, kind.value)
            return None if read is None else read.covered_until

    def save_resources(
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
