"""Pods' logs kept after their instance ends."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    Mapping,
    PodLog,
)


class SavedLogs:
    """The kept lines of each pod's log."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def save(
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

    def read(self, pod_uid: str) -> list[tuple[datetime, str]] | None:
        with self._sessions() as session:
            found = session.get(PodLog, pod_uid)
            if found is None:
                return None
            return [(datetime.fromisoformat(ts), line) for ts, line in json.loads(found.lines)]

    def has(self, pod_uid: str) -> bool:
        with self._sessions() as session:
            return session.get(PodLog, pod_uid) is not None
