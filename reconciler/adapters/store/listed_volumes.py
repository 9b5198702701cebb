"""RunPod's network volumes of ours as last listed, for the leak audit and `cost`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    ListedVolume,
    ResourceList,
)
from reconciler.core.domain import (
    RunPodVolume,
)
from reconciler.core.resources.volume_leaks import KnownVolume

_VOLUME_LIST = "network-volumes"


class ListedVolumes:
    """The kept list of our network volumes."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def listed(self) -> tuple[datetime | None, list[KnownVolume]]:
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

    def save(self, ours: Sequence[RunPodVolume], now: datetime) -> None:
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

    def forget(self, volume_id: str) -> None:
        """A volume RunPod deleted: the kept list no longer shows it."""
        with self._sessions.begin() as session:
            session.execute(delete(ListedVolume).where(ListedVolume.volume_id == volume_id))

    def mark_leaks(self, leaked: Sequence[str], now: datetime) -> None:
        """Which kept volumes the audit found leaked (for `reconciler cost`); written
        only when that changes."""
        with self._sessions.begin() as session:
            for row in session.scalars(select(ListedVolume)):
                if row.volume_id in leaked and row.leaked_since is None:
                    row.leaked_since = now
                elif row.volume_id not in leaked and row.leaked_since is not None:
                    row.leaked_since = None
