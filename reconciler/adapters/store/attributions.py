"""Whose each network volume and cluster is, for the charges of `cost`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    ActionRecord,
    BilledResource,
)
from reconciler.core.money.attribution import Attribution


class SavedAttributions:
    """Who each billed resource belongs to."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def save(self, found: Sequence[Attribution], now: datetime) -> None:
        """Whose these resources are (each written as found: the caller writes only news)."""
        with self._sessions.begin() as session:
            for item in found:
                session.merge(
                    BilledResource(
                        kind=str(item.kind),
                        resource_id=item.resource_id,
                        namespace=item.namespace,
                        name=item.name,
                        owner_uid=item.owner_uid,
                        detail=item.detail,
                        updated_at=now,
                    )
                )

    def read(self, kind: str, ids: Sequence[str]) -> dict[str, tuple[Attribution, datetime]]:
        """What is written of these resources (by id), with when it was written."""
        with self._sessions() as session:
            query = (
                select(BilledResource)
                .where(BilledResource.kind == str(kind))
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
                select(ActionRecord.resource_id, func.max(ActionRecord.finished_at))
                .where(ActionRecord.kind == "delete-cluster")
                .where(ActionRecord.outcome == "ok")
                .where(ActionRecord.resource_id.is_not(None))
                .group_by(ActionRecord.resource_id)
            )
            return {str(i): at for i, at in session.execute(query) if at is not None}
