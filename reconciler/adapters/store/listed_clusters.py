"""When a list first showed each cluster of ours whose age RunPod's answer did not give
(no member with a `createdAt`): its graces count from then (`core.resources.cluster_age`),
after a restart or in a `sync --once` run too."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import ListedCluster


class ListedClusters:
    """The kept first sightings of undated clusters."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def first_listed(self) -> dict[str, datetime]:
        """By cluster id: when a list first showed it, as kept."""
        with self._sessions() as session:
            rows = session.scalars(select(ListedCluster))
            return {row.cluster_id: row.first_listed_at for row in rows}

    def keep(self, first: Mapping[str, datetime]) -> None:
        """Keep these first sightings in place of the last ones (a cluster no longer
        listed undated is forgotten)."""
        with self._sessions.begin() as session:
            kept = {row.cluster_id: row for row in session.scalars(select(ListedCluster))}
            for cluster_id, row in kept.items():
                if cluster_id not in first:
                    session.delete(row)
            for cluster_id, at in first.items():
                if cluster_id not in kept:
                    session.add(ListedCluster(cluster_id=cluster_id, first_listed_at=at))
