"""Writes to the state store, each in its own short transaction.

The executor calls these between HTTP calls, never around them (docs/architecture.md
§2): a crash leaves at most one side effect whose result was not recorded, and the
protocol of docs/architecture.md §4 is built to recover exactly that.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import ActionRecord, Lock, Mapping, PodLog, Tick
from reconciler.core.mapping import MappingRecord

_FIELDS = [f.name for f in dataclasses.fields(MappingRecord)]
# A tick row keeps the first errors; the log has them all.
MAX_TICK_ERRORS = 20


@dataclass(frozen=True)
class TickSummary:
    """What the row of a finished tick records, for `state show` and post-mortems."""

    started_at: datetime
    finished_at: datetime
    pods_seen: int
    instances_seen: int
    actions_planned: int
    actions_applied: int
    actions_failed: int
    errors: tuple[str, ...] = ()


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

    def row(self, pod_uid: str) -> MappingRecord | None:
        with self._sessions() as session:
            found = session.get(Mapping, pod_uid)
            if found is None:
                return None
            return MappingRecord(**{f: getattr(found, f) for f in _FIELDS})

    # --- pod logs kept after the end ---------------------------------------------

    def save_log(self, pod_uid: str, instance_id: str | None,
                 lines: Sequence[tuple[datetime, str]], truncated: bool, now: datetime) -> bool:
        """Keep these lines for the pod; False when its row is gone (nothing to keep)."""
        text = json.dumps([[ts.isoformat(), line] for ts, line in lines])
        with self._sessions.begin() as session:
            if session.get(Mapping, pod_uid) is None:
                return False
            session.merge(PodLog(pod_uid=pod_uid, instance_id=instance_id, lines=text,
                                 truncated=truncated, saved_at=now))
        return True

    def saved_log(self, pod_uid: str) -> list[tuple[datetime, str]] | None:
        with self._sessions() as session:
            found = session.get(PodLog, pod_uid)
            if found is None:
                return None
            return [(datetime.fromisoformat(ts), line) for ts, line in json.loads(found.lines)]

    def has_saved_log(self, pod_uid: str) -> bool:
        with self._sessions() as session:
            return session.get(PodLog, pod_uid) is not None

    def note_error(self, pod_uid: str, message: str, now: datetime) -> None:
        with self._sessions.begin() as session:
            session.execute(update(Mapping).where(Mapping.pod_uid == pod_uid)
                            .values(last_error=message, updated_at=now))

    # --- ticks and the journal ----------------------------------------------------

    def open_tick(self, started_at: datetime) -> int:
        """The row of a tick in progress, for its journal entries to point at; its id."""
        with self._sessions.begin() as session:
            tick = Tick(started_at=started_at)
            session.add(tick)
            session.flush()
            return tick.id

    def record_tick(self, summary: TickSummary, tick_id: int | None = None) -> int:
        """Write a finished tick's row (the one `open_tick` gave, if any); its id."""
        row = Tick(id=tick_id, started_at=summary.started_at, finished_at=summary.finished_at,
                   pods_seen=summary.pods_seen, instances_seen=summary.instances_seen,
                   actions_planned=summary.actions_planned,
                   actions_applied=summary.actions_applied,
                   actions_failed=summary.actions_failed, dry_run=False,
                   error_summary="\n".join(summary.errors[:MAX_TICK_ERRORS]) or None)
        with self._sessions.begin() as session:
            merged = session.merge(row)
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
