"""The rows a steady tick reads: given again without reading the table while nobody
wrote to it, and read anew after any write, whoever made it (this store, another
process's store, the CLI, SQL by hand), as the database's own count of writes says."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.repository import Store
from reconciler.core.mapping import MappingRow, MappingState

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def row(uid: str, **changes: Any) -> MappingRow:
    return MappingRow(uid, "ns", f"pod-{uid}", MappingState.RUNNING, T0, T0).changed(**changes)


class TableReads:
    def __init__(self, engine: Engine) -> None:
        self.count = 0
        event.listen(engine, "before_cursor_execute", self._statement)

    def _statement(self, _c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
        self.count += "FROM mappings" in statement


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "db.sqlite"


@pytest.fixture
def engine(path: Path) -> Engine:
    sql = db.make_engine(f"sqlite:///{path}")
    migrate.upgrade(sql)
    return sql


@pytest.fixture
def store(engine: Engine) -> Store:
    found = Store(db.session_factory(engine))
    found.save_row(row("a"))
    found.save_row(row("b"))
    return found


def test_unwritten_rows_are_given_again_without_reading_the_table(
    store: Store, engine: Engine
) -> None:
    first = store.load_rows()
    reads = TableReads(engine)
    again = store.load_rows()
    assert reads.count == 0
    assert again == first and again is not first  # the caller's list is its own
    again.clear()
    assert [r.pod_uid for r in store.load_rows()] == ["a", "b"]


def test_this_stores_writes_are_read(store: Store) -> None:
    store.load_rows()
    store.save_row(row("a", instance_id="i-1"))
    store.delete_row("b")
    batch = store.batch()
    batch.save_row(row("c"))
    batch.commit()
    assert {(r.pod_uid, r.instance_id) for r in store.load_rows()} == {("a", "i-1"), ("c", None)}


def test_another_stores_write_is_read(store: Store, path: Path) -> None:
    """Another replica's or the CLI's store: its own engine, its own connections."""
    store.load_rows()
    other = Store(db.session_factory(db.make_engine(f"sqlite:///{path}")))
    other.save_row(row("a", reason=None, instance_id="i-2"))
    assert {r.instance_id for r in store.load_rows()} == {"i-2", None}


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE mappings SET instance_id = 'by-hand' WHERE pod_uid = 'a'",
        "DELETE FROM mappings WHERE pod_uid = 'a'",
        "INSERT INTO mappings (pod_uid, namespace, name, state, orphan_sightings, created_at,"
        " updated_at) VALUES ('z', 'ns', 'pod-z', 'running', 0, '2026-05-01 00:00:00',"
        " '2026-05-01 00:00:00')",
    ],
    ids=["update", "delete", "insert"],
)
def test_a_write_by_hand_is_read(store: Store, path: Path, sql: str) -> None:
    before = store.load_rows()
    with sqlite3.connect(path) as connection:
        connection.execute(sql)
    with sqlite3.connect(path) as connection:
        expected = connection.execute("SELECT pod_uid, instance_id FROM mappings").fetchall()
    after = store.load_rows()
    assert after != before
    assert sorted((r.pod_uid, r.instance_id) for r in after) == sorted(expected)


def test_the_count_moves_once_per_write(engine: Engine, store: Store) -> None:
    def count() -> int:
        with engine.connect() as connection:
            return int(connection.execute(text("SELECT value FROM mapping_generation")).scalar())

    before = count()
    store.save_row(row("a", instance_id="i-3"))
    assert count() == before + 1
    store.load_rows()
    assert count() == before + 1  # reading writes nothing


def test_a_restored_backup_and_a_count_moved_back_to_the_cached_value_are_read(
    store: Store, path: Path, tmp_path: Path
) -> None:
    """An older backup restored under a running reconciler, then a second writer's
    writes bring the count back to the value this store cached: the rows are read
    anew, never the cached ones the database no longer has."""
    backup = tmp_path / "backup.sqlite"
    with sqlite3.connect(path) as live, sqlite3.connect(backup) as copy:
        live.backup(copy)
    store.save_row(row("c"))
    assert {r.pod_uid for r in store.load_rows()} == {"a", "b", "c"}  # cached

    with sqlite3.connect(backup) as copy, sqlite3.connect(path) as live:
        copy.backup(live)  # the restore: "c" is gone, the count one lower
    other = Store(db.session_factory(db.make_engine(f"sqlite:///{path}")))
    other.save_row(row("d"))  # the count is back at the cached value

    assert {r.pod_uid for r in store.load_rows()} == {"a", "b", "d"}


def test_each_kind_of_write_draws_a_new_token(engine: Engine, store: Store, path: Path) -> None:
    """The store's upsert, and a plain INSERT, UPDATE and DELETE by hand: each its own."""

    def token() -> str:
        with engine.connect() as connection:
            return str(connection.execute(text("SELECT token FROM mapping_generation")).scalar())

    tokens = [token()]
    store.save_row(row("a", instance_id="i-1"))
    tokens.append(token())
    for sql in (
        "INSERT INTO mappings (pod_uid, namespace, name, state, orphan_sightings, created_at,"
        " updated_at) VALUES ('z', 'ns', 'pod-z', 'running', 0, '2026-05-01 00:00:00',"
        " '2026-05-01 00:00:00')",
        "UPDATE mappings SET instance_id = 'by-hand' WHERE pod_uid = 'z'",
        "DELETE FROM mappings WHERE pod_uid = 'z'",
    ):
        with sqlite3.connect(path) as connection:
            connection.execute(sql)
        tokens.append(token())
    assert len(set(tokens)) == len(tokens) and all(len(t) == 32 for t in tokens)
