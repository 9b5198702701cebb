"""Pods' logs kept after their instance ends, and gang pods' after their cluster's
deletion (a gang pod has no mapping row: its lines go until the pod leaves the node)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    Mapping,
    MemberLog,
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

    def save_member(
        self,
        pod_uid: str,
        job_uid: str,
        instance_id: str,
        lines: Sequence[tuple[datetime, str]],
        truncated: bool,
        now: datetime,
    ) -> None:
        """Keep these lines of a gang pod's member."""
        text = json.dumps([[ts.isoformat(), line] for ts, line in lines])
        with self._sessions.begin() as session:
            session.merge(
                MemberLog(
                    pod_uid=pod_uid,
                    job_uid=job_uid,
                    instance_id=instance_id,
                    lines=text,
                    truncated=truncated,
                    saved_at=now,
                )
            )

    def member_pods(self) -> set[str]:
        """The gang pods whose lines are kept."""
        with self._sessions() as session:
            return set(session.scalars(select(MemberLog.pod_uid)))

    def forget_members(self, pod_uids: Sequence[str]) -> None:
        """The kept lines of gang pods gone from the node."""
        if not pod_uids:
            return
        with self._sessions.begin() as session:
            session.execute(delete(MemberLog).where(MemberLog.pod_uid.in_(list(pod_uids))))

    def read(self, pod_uid: str) -> list[tuple[datetime, str]] | None:
        with self._sessions() as session:
            found: PodLog | MemberLog | None = session.get(PodLog, pod_uid)
            found = found or session.get(MemberLog, pod_uid)
            if found is None:
                return None
            return [(datetime.fromisoformat(ts), line) for ts, line in json.loads(found.lines)]

    def has(self, pod_uid: str) -> bool:
        with self._sessions() as session:
            kept = session.get(PodLog, pod_uid) or session.get(MemberLog, pod_uid)
            return kept is not None
