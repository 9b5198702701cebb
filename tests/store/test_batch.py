"""The write batch: noted row and journal writes reach the database only on
`commit()`, all in one transaction; the last write of a row wins; an error noted on a row
lands on it; a journal entry committed open is closed by an update; a failed commit rolls
back and loses what it carried; with nothing noted, no transaction at all. The path for
databases without an upsert writes the same rows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.exc import IntegrityError

from reconciler.adapters.store import batch as batch_module
from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.repository import Store
from reconciler.core.mapping import MappingRow, MappingState

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def row(uid: str, **changes: Any) -> MappingRow:
    return MappingRow(uid, "ns", f"pod-{uid}", MappingState.RUNNING, T0, T0).changed(**changes)


class Commits:
    """Transactions that wrote, as seen by the engine's events."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        self._wrote = False
        event.listen(engine, "after_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)

    def _statement(self, _c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
        if statement.split()[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            self._wrote = True

    def _commit(self, _conn: Any) -> None:
        self.count += self._wrote
        self._wrote = False


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    sql = db.make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    migrate.upgrade(sql)
    return sql


@pytest.fixture(params=["upsert", "select-then-write"])
def store(request: pytest.FixtureRequest, engine: Engine) -> Iterator[Store]:
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "select-then-write":  # as on a database without an upsert
            patch.setattr(batch_module, "_UPSERT_ROW", {})
        yield Store(db.session_factory(engine))


def test_noted_writes_reach_the_database_in_one_transaction_on_commit(
    store: Store, engine: Engine
) -> None:
    store.save_row(row("gone"))
    store.save_row(row("kept", instance_id="i-kept"))
    commits = Commits(engine)
    writes = store.batch()
    writes.save_row(row("a", state=MappingState.CREATING))
    writes.save_row(row("a", instance_id="i-a"))  # the last write of a row wins
    writes.save_row(row("kept", instance_id="i-kept", cost_per_hr=0.5))
    writes.delete_row("gone")
    entry = writes.open_action(None, "create", "a", None, T0)
    writes.close_action(entry, "ok", None, T0 + timedelta(seconds=1), resource_id="i-a")
    assert {r.pod_uid for r in store.load_rows()} == {"gone", "kept"}
    assert store.journal() == []
    writes.commit()
    assert commits.count == 1
    rows = {r.pod_uid: r for r in store.load_rows()}
    assert set(rows) == {"a", "kept"}
    assert rows["a"].instance_id == "i-a" and rows["a"].state is MappingState.RUNNING
    assert rows["kept"].cost_per_hr == 0.5
    [journal] = store.journal()
    assert (journal.kind, journal.outcome, journal.resource_id) == ("create", "ok", "i-a")
    assert journal.finished_at is not None


def test_nothing_noted_is_no_transaction(store: Store, engine: Engine) -> None:
    commits = Commits(engine)
    store.batch().commit()
    assert commits.count == 0


def test_an_error_noted_lands_on_the_row_and_never_makes_one(store: Store) -> None:
    store.save_row(row("stored"))
    writes = store.batch()
    writes.save_row(row("noted-in-batch"))
    writes.note_error("noted-in-batch", "boom", T0 + timedelta(seconds=5))
    writes.note_error("stored", "bang", T0 + timedelta(seconds=6))
    writes.note_error("missing", "nothing to note on", T0)
    writes.commit()
    rows = {r.pod_uid: r for r in store.load_rows()}
    assert set(rows) == {"stored", "noted-in-batch"}
    assert rows["noted-in-batch"].last_error == "boom"
    assert rows["stored"].last_error == "bang"
    assert rows["stored"].updated_at == T0 + timedelta(seconds=6)


def test_an_entry_committed_open_stays_open_until_its_close_is_committed(store: Store) -> None:
    writes = store.batch()
    writes.save_row(row("a", state=MappingState.CREATING))
    entry = writes.open_action(None, "create", "a", None, T0)
    writes.commit()  # the intent and the open entry, before the call
    [opened] = store.journal()
    assert opened.finished_at is None and opened.outcome is None
    writes.close_action(entry, "failed", "500", T0 + timedelta(seconds=2))
    assert store.journal()[0].outcome is None
    writes.commit()
    [closed] = store.journal()
    assert (closed.id, closed.outcome, closed.error) == (opened.id, "failed", "500")


def test_a_failed_commit_rolls_back_and_loses_what_it_carried(store: Store) -> None:
    store.save_row(row("a", instance_id="i-1"))
    writes = store.batch()
    writes.save_row(row("b"))
    writes.save_row(row("c", instance_id="i-1"))  # instance ids are unique
    with pytest.raises(IntegrityError):
        writes.commit()
    assert {r.pod_uid for r in store.load_rows()} == {"a"}
    assert not writes.pending
    writes.commit()  # nothing is tried again
    assert {r.pod_uid for r in store.load_rows()} == {"a"}
