"""Instances' SSH host keys as first seen (trust on first use)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    HostKey,
)


class SavedHostKeys:
    """The host key first seen for each instance."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def remember(self, instance_id: str, key: str, now: datetime) -> str:
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
            return self.remember(instance_id, key, now)
