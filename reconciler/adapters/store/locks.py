"""The database writer lock: one writer per database at a time."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    Lock,
)


class Locks:
    """The writer lock of a database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def acquire(
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
            return self.acquire(name, owner, ttl, now, dead_holder)

    def release(self, name: str, owner: str) -> None:
        with self._sessions.begin() as session:
            session.execute(delete(Lock).where(Lock.name == name).where(Lock.owner == owner))
