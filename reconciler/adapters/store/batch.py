"""The row and journal writes of a run, gathered into few transactions (docs/architecture.md §2).

A run's context (`RunContext`, `runtime/tick/run_context.py`) notes its writes here
instead of committing each one, and `commit()` sends all that is pending in one
transaction. Where a write must be durable before a call (docs/architecture.md §4: a
create's intent before the POST, a terminate's row before the DELETE), the run context
commits right before that call (`journaled(..., durable_at=...)`); everything else waits
for the next such commit or the executor's one at the end of the run. A crash in between
loses only writes that record what a call did, and each of those the next tick learns
again by observing both worlds: the instance a create made is found by its tags and
adopted, a patched status is seen on the pod, a deleted pod is gone. So a tick that
replaces a hundred pods costs about two transactions per pod, not fifteen.

A commit that fails loses what it carried (the transaction rolls back), for the same
reason: the next tick rebuilds it from the two worlds. It raises, so the action that
needed it fails before its call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import ActionRecord, InstantCluster, Mapping
from reconciler.core.cluster_row import ClusterRow
from reconciler.core.mapping import MappingRow


@dataclass
class JournalEntry:
    """One journal row: a side effect, opened before its call and closed after it."""

    tick_id: int | None
    kind: str
    pod_uid: str | None
    resource_id: str | None
    started_at: datetime
    finished_at: datetime | None = None
    outcome: str | None = None
    error: str | None = None
    id: int | None = None
    """The row's id once committed; a row committed open is updated when it closes."""

    def values(self) -> dict[str, Any]:
        return {
            "tick_id": self.tick_id,
            "kind": self.kind,
            "pod_uid": self.pod_uid,
            "resource_id": self.resource_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "outcome": self.outcome,
            "error": self.error,
        }


class WriteBatch:
    def __init__(self, sessions: sessionmaker[Session], node: str | None = None) -> None:
        """`node`: the virtual node the rows written belong to (None: the CLI, which
        writes no row)."""
        self._sessions = sessions
        self._node = node
        self._rows: dict[str, MappingRow | None] = {}
        """The latest write of each pod's row this batch; None deletes it."""
        self._notes: dict[str, tuple[str, datetime]] = {}
        """Errors to note on rows this batch does not otherwise write."""
        self._entries: list[JournalEntry] = []
        """Journal rows opened, or committed open and since closed, not yet written."""
        self._clusters: dict[str, ClusterRow | None] = {}
        """The latest write of each gang's cluster row this batch; None deletes it."""

    @property
    def pending(self) -> bool:
        return bool(self._rows or self._notes or self._entries or self._clusters)

    def save_cluster(self, row: ClusterRow) -> None:
        self._clusters[row.gang] = row

    def delete_cluster(self, gang: str) -> None:
        self._clusters[gang] = None

    # --- noting writes -------------------------------------------------------------

    def save_row(self, row: MappingRow) -> None:
        # Moved to the end: rows are written in the order of their last change.
        self._rows.pop(row.pod_uid, None)
        self._rows[row.pod_uid] = row
        self._notes.pop(row.pod_uid, None)

    def delete_row(self, pod_uid: str) -> None:
        self._rows.pop(pod_uid, None)
        self._rows[pod_uid] = None
        self._notes.pop(pod_uid, None)

    def note_error(self, pod_uid: str, message: str, now: datetime) -> None:
        """Put the error on the pod's row, if it has one (a missing row stays missing)."""
        if pod_uid not in self._rows:
            self._notes[pod_uid] = (message, now)
            return
        row = self._rows[pod_uid]
        if row is not None:
            self._rows[pod_uid] = row.changed(last_error=message, updated_at=now)

    def open_action(
        self,
        tick_id: int | None,
        kind: str,
        pod_uid: str | None,
        resource_id: str | None,
        now: datetime,
    ) -> JournalEntry:
        entry = JournalEntry(tick_id, kind, pod_uid, resource_id, now)
        self._entries.append(entry)
        return entry

    def close_action(
        self,
        entry: JournalEntry,
        outcome: str,
        error: str | None,
        now: datetime,
        resource_id: str | None = None,
    ) -> None:
        entry.outcome, entry.error, entry.finished_at = outcome, error, now
        if resource_id is not None:
            entry.resource_id = resource_id
        if entry.id is not None:  # committed while open: its row is updated
            self._entries.append(entry)

    # --- writing -------------------------------------------------------------------

    def commit(self) -> None:
        """Write everything pending in one transaction (none when nothing is)."""
        if not self.pending:
            return
        rows, notes, entries = self._rows, self._notes, self._entries
        clusters = self._clusters
        self._rows, self._notes, self._entries, self._clusters = {}, {}, [], {}
        with self._sessions.begin() as session:
            _write_rows(session, rows, self._node)
            _write_notes(session, notes)
            _write_journal(session, entries)
            _write_clusters(session, clusters, self._node)


# Core statements on the tables: executemany without the ORM's per-row bookkeeping.
_MAPPINGS: Table = Mapping.__table__  # type: ignore[assignment]
_ACTIONS: Table = ActionRecord.__table__  # type: ignore[assignment]
_ROW_FIELDS = [f.name for f in dataclasses.fields(MappingRow)]
_ROW_COLUMNS = [*_ROW_FIELDS, "node"]
_UPDATE_ROW = (
    _MAPPINGS.update()
    .where(_MAPPINGS.c.pod_uid == bindparam("key"))
    .values({name: bindparam(name) for name in _ROW_COLUMNS if name != "pod_uid"})
)


def _upsert_row(insert: Callable[[Table], Any]) -> Any:
    """INSERT … ON CONFLICT (pod_uid) DO UPDATE: one statement whether the row exists."""
    statement = insert(_MAPPINGS)
    return statement.on_conflict_do_update(
        index_elements=[_MAPPINGS.c.pod_uid],
        set_={name: statement.excluded[name] for name in _ROW_COLUMNS if name != "pod_uid"},
    )


# The two databases the store is made for; another one takes a SELECT and two statements.
_UPSERT_ROW = {
    "sqlite": _upsert_row(sqlite.insert),
    "postgresql": _upsert_row(postgresql.insert),
}
_NOTE_ERROR = (
    _MAPPINGS.update()
    .where(_MAPPINGS.c.pod_uid == bindparam("key"))
    .values(last_error=bindparam("last_error"), updated_at=bindparam("updated_at"))
)
_CLOSE_ENTRY = (
    _ACTIONS.update()
    .where(_ACTIONS.c.id == bindparam("key"))
    .values(
        finished_at=bindparam("finished_at"),
        outcome=bindparam("outcome"),
        error=bindparam("error"),
        resource_id=bindparam("resource_id"),
    )
)


def _write_rows(session: Session, rows: dict[str, MappingRow | None], node: str | None) -> None:
    deleted = [uid for uid, row in rows.items() if row is None]
    if deleted:
        gone = _MAPPINGS.delete().where(_MAPPINGS.c.pod_uid.in_(deleted))
        if node is not None:  # another node's row is never ours to delete
            gone = gone.where(or_(_MAPPINGS.c.node == node, _MAPPINGS.c.node.is_(None)))
        session.execute(gone)
    saved = [_values(row, node) for row in rows.values() if row is not None]
    if not saved:
        return
    upsert = _UPSERT_ROW.get(session.get_bind().dialect.name)
    if upsert is not None:
        session.execute(upsert, saved)
        return
    existing = set(
        session.scalars(
            select(_MAPPINGS.c.pod_uid).where(
                _MAPPINGS.c.pod_uid.in_([r["pod_uid"] for r in saved])
            )
        )
    )
    updates = [r | {"key": r["pod_uid"]} for r in saved if r["pod_uid"] in existing]
    inserts = [r for r in saved if r["pod_uid"] not in existing]
    if updates:
        session.execute(_UPDATE_ROW, updates)
    if inserts:
        session.execute(_MAPPINGS.insert(), inserts)


def _values(row: MappingRow, node: str | None) -> dict[str, Any]:
    # Not dataclasses.asdict: it deep-copies every value, and the values are immutable.
    return {**{name: getattr(row, name) for name in _ROW_FIELDS}, "node": node}


def _write_notes(session: Session, notes: dict[str, tuple[str, datetime]]) -> None:
    if notes:  # a row that is gone stays gone: its UPDATE matches nothing
        session.execute(
            _NOTE_ERROR,
            [
                {"key": uid, "last_error": message, "updated_at": now}
                for uid, (message, now) in notes.items()
            ],
        )


def _write_journal(session: Session, entries: Iterable[JournalEntry]) -> None:
    new_closed, new_open, reclosed = [], [], []
    for entry in entries:
        if entry.id is not None:
            reclosed.append(entry)
        elif entry.finished_at is not None:
            new_closed.append(entry)
        else:
            new_open.append(entry)
    if new_closed:
        session.execute(_ACTIONS.insert(), [e.values() for e in new_closed])
    for entry in new_open:  # its call is next: the row's id is kept to close it later
        inserted = session.execute(_ACTIONS.insert(), entry.values())
        entry.id = inserted.inserted_primary_key[0]  # type: ignore[attr-defined]
    if reclosed:
        session.execute(
            _CLOSE_ENTRY,
            [
                {
                    "key": e.id,
                    "finished_at": e.finished_at,
                    "outcome": e.outcome,
                    "error": e.error,
                    "resource_id": e.resource_id,
                }
                for e in reclosed
            ],
        )


_CLUSTER_FIELDS = [f.name for f in dataclasses.fields(ClusterRow)]


def _write_clusters(
    session: Session, clusters: dict[str, ClusterRow | None], node: str | None
) -> None:
    """Few rows (one per gang), so the ORM's merge is cheap enough."""
    for gang, record in clusters.items():
        if record is None:
            found = session.get(InstantCluster, gang)
            if found is not None and found.node in (None, node or found.node):
                session.delete(found)
            continue
        values = {name: getattr(record, name) for name in _CLUSTER_FIELDS}
        session.merge(InstantCluster(**values, node=node))
