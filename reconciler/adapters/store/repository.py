"""Writes to the state store, each in its own short transaction.

The executor calls these between HTTP calls, never around them (DESIGN §2): a crash
leaves at most one side effect whose result was not recorded, and the protocol of
DESIGN §3 is built to recover exactly that.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import ActionRecord, Lock, Mapping, Tick
from reconciler.core.mapping import MappingRecord

_FIELDS = [f.name for f in dataclasses.fields(MappingRecord)]


class Store:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    # --- mappings ---------------------------------------------------------------

    def load_rows(self) -> list[MappingRecord]:
        with self._sessions() as session:
            result = session.execute(select(*(getattr(Mapping, f) for f in _FIELDS)))
            return [MappingRecord(**row._asdict()) for row in result]

    def save_row(self, record: MappingRecord) -> None:
        with self._sessions.begin() as session:
            session.merge(Mapping(**dataclasses.asdict(record)))

    def delete_row(self, pod_uid: str) -> None:
        with self._sessions.begin() as session:
            session.execute(delete(Mapping).where(Mapping.pod_uid == pod_uid))

    def note_error(self, pod_uid: str, message: str, now: datetime) -> None:
        with self._sessions.begin() as session:
            session.execute(update(Mapping).where(Mapping.pod_uid == pod_uid)
                            .values(last_error=message, updated_at=now))

    # --- ticks and the journal ----------------------------------------------------

    def record_tick(self, tick: Tick) -> int:
        """Insert or update a tick row; returns its id."""
        with self._sessions.begin() as session:
            merged = session.merge(tick)
            session.flush()
            return merged.id

    def open_action(self, tick_id: int | None, kind: str, pod_uid: str | None,
                    instance_id: str | None, now: datetime) -> int:
        with self._sessions.begin() as session:
            result = session.execute(insert(ActionRecord).values(
                tick_id=tick_id, kind=kind, pod_uid=pod_uid, instance_id=instance_id,
                started_at=now).returning(ActionRecord.id))
            return int(result.scalar_one())

    def close_action(self, action_id: int, outcome: str, error: str | None, now: datetime,
                     instance_id: str | None = None) -> None:
        values: dict[str, object] = {"outcome": outcome, "error": error, "finished_at": now}
        if instance_id is not None:
            values["instance_id"] = instance_id
        with self._sessions.begin() as session:
            session.execute(update(ActionRecord).where(ActionRecord.id == action_id)
                            .values(**values))

    def journal(self, tick_id: int | None = None) -> Sequence[ActionRecord]:
        with self._sessions() as session:
            query = select(ActionRecord).order_by(ActionRecord.id)
            if tick_id is not None:
                query = query.where(ActionRecord.tick_id == tick_id)
            return list(session.scalars(query))

    # --- the writer lock ----------------------------------------------------------

    def acquire_lock(self, name: str, owner: str, ttl: float, now: datetime,
                     dead_holder: str | None = None) -> str | None:
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
                update(Lock).where(Lock.name == name).where(stale)
                .values(owner=owner, acquired_at=now, expires_at=expires))
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
            return self.acquire_lock(name, owner, ttl, now, dead_holder)

    def release_lock(self, name: str, owner: str) -> None:
        with self._sessions.begin() as session:
            session.execute(delete(Lock).where(Lock.name == name).where(Lock.owner == owner))
