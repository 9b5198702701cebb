"""When a list first showed each cluster of ours whose age RunPod's answer did not give
(no member with a `createdAt`): its graces count from then (`core.resources.cluster_age`),
after a restart or in a `sync --once` run too."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import ListedCluster


class ListedClusters:
    """The kept first sightings of undated clusters."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def sighted(self, undated: Collection[str], now: datetime) -> dict[str, datetime]:
        """The list shows these undated clusters (and no other): each keeps when a list
        first showed it (`now` for one not kept yet); the others are forgotten. Writes
        only what changed."""
        with self._sessions.begin() as session:
            kept = {row.cluster_id: row for row in session.scalars(select(ListedCluster))}
            for cluster_id, row in kept.items():
                if cluster_id not in undated:
                    session.delete(row)
            first = {cid: row.first_listed_at for cid, row in kept.items() if cid in undated}
            for cluster_id in sorted(set(undated) - first.keys()):
                session.add(ListedCluster(cluster_id=cluster_id, first_listed_at=now))
                first[cluster_id] = now
            return first
