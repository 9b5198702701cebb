"""The state store on PostgreSQL, the database for more than one replica: the migrations
apply (also from replicas starting together), a pod's whole life runs through the engine
with its rows there, deleting the rows rebuilds them without a second create, the
writer lock refuses a second writer, and the rows a steady tick reuses are read anew
after a restored backup (even one whose count a second writer moved back).

Runs against RECONCILER_TEST_POSTGRES_URL, else a throwaway server from Debian's
postgresql package; skipped, with the reason, when neither can be had (a failure where
CI is set: tests/needs.py).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, event, text

from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.repository import Store
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.process.wiring import LOCK_NAME, LOCK_TTL, open_store
from tests import needs
from tests.integration.test_nodes_share_a_database import two_nodes_leave_each_other_alone
from tests.store.upgrades import upgrade_at_once

from . import postgres
from .conftest import FAST

T0 = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    if importlib.util.find_spec("psycopg") is None:
        needs.unavailable(
            "the PostgreSQL driver psycopg is not installed (pip install -e '.[test]')"
        )
    try:
        with postgres.server() as url:
            yield url
    except postgres.Unavailable as reason:
        needs.unavailable(str(reason))


@pytest.fixture
def url(server: str) -> Iterator[str]:
    with postgres.database(server) as database_url:
        yield database_url


def test_replicas_upgrading_at_once_all_succeed(url: str) -> None:
    assert upgrade_at_once(url) == []
    assert migrate.current_revision(db.make_engine(url)) == migrate.head_revision()


def test_a_pods_life_with_its_rows_in_postgres(url: str) -> None:
    with Sandbox(FAST, database_url=url) as box:
        box.add_pod("web", ports=[8888])
        box.tick()
        box.advance(30)
        box.tick()
        assert (box.pod("web") or {})["status"]["phase"] == "Running"
        instance = box.instance_for(box.pod("web") or {})
        assert instance is not None

        with db.make_engine(url).connect() as connection:
            rows = connection.execute(text("SELECT instance_id FROM mappings")).all()
        assert [row.instance_id for row in rows] == [instance["id"]]

        box.kube_sim.delete_pod("default", "web", grace_seconds=30)
        for _ in range(3):
            box.tick()
        assert box.pod("web") is None and box.owned_instances() == []


def test_lost_rows_are_rebuilt_without_a_second_create(url: str) -> None:
    with Sandbox(FAST, database_url=url) as box:
        box.add_pod("web")
        box.tick()
        with db.make_engine(url).begin() as connection:
            connection.execute(text("DELETE FROM mappings"))
        box.restart()
        box.advance(30)
        box.tick()
        box.tick()
        assert len(box.owned_instances()) == 1


def test_the_writer_lock_refuses_a_second_writer_until_it_expires(url: str) -> None:
    store = open_store(url, upgrade=True)
    assert store.locks.acquire(LOCK_NAME, "a", LOCK_TTL, T0) is None
    assert store.locks.acquire(LOCK_NAME, "b", LOCK_TTL, T0 + timedelta(seconds=10)) == "a"
    assert (
        store.locks.acquire(LOCK_NAME, "b", LOCK_TTL, T0 + timedelta(seconds=10), dead_holder="a")
        is None
    )
    expired = T0 + timedelta(seconds=10 + LOCK_TTL + 1)
    assert store.locks.acquire(LOCK_NAME, "c", LOCK_TTL, expired) is None


def test_rows_written_elsewhere_are_read_by_the_next_tick(url: str) -> None:
    """The rows a steady tick reads again only while PostgreSQL's own count of writes to
        them says nobody wrote: a write by another connection, even by hand, is read, whether it
    inserts, updates, deletes or truncates."""
    store = open_store(url, upgrade=True)
    store.save_row(MappingRow("a", "ns", "pod-a", MappingState.RUNNING, T0, T0))
    assert [r.instance_id for r in store.load_rows()] == [None]
    with db.make_engine(url).begin() as connection:
        connection.execute(text("UPDATE mappings SET instance_id = 'by-hand'"))
    assert [r.instance_id for r in store.load_rows()] == ["by-hand"]
    with db.make_engine(url).begin() as connection:
        # A plain INSERT: the store's own upsert also fires PostgreSQL's UPDATE triggers.
        connection.execute(
            text(
                "INSERT INTO mappings (pod_uid, namespace, name, state, orphan_sightings,"
                " created_at, updated_at) VALUES ('b', 'ns', 'pod-b', 'pending', 0,"
                " '2026-05-01 00:00:00+00', '2026-05-01 00:00:00+00')"
            )
        )
    assert sorted(r.pod_uid for r in store.load_rows()) == ["a", "b"]
    with db.make_engine(url).begin() as connection:
        connection.execute(text("DELETE FROM mappings WHERE pod_uid = 'a'"))
    assert [r.pod_uid for r in store.load_rows()] == ["b"]
    with db.make_engine(url).begin() as connection:
        connection.execute(text("TRUNCATE mappings CASCADE"))
    assert store.load_rows() == []


def _restore(url: str, rows: list[tuple[str, str]], generation: tuple[int, str]) -> None:
    """A backup's rows and generation put back as pg_restore puts data back: before the
    triggers (here: with them disabled), so the restore itself moves nothing."""
    with db.make_engine(url).begin() as connection:
        connection.execute(text("ALTER TABLE mappings DISABLE TRIGGER USER"))
        connection.execute(text("DELETE FROM mappings"))
        for uid, name in rows:
            connection.execute(
                text(
                    "INSERT INTO mappings (pod_uid, namespace, name, state, orphan_sightings, "
                    "created_at, updated_at) VALUES (:uid, 'ns', :name, 'running', 0, "
                    "'2026-05-01', '2026-05-01')"
                ),
                {"uid": uid, "name": name},
            )
        connection.execute(
            text("UPDATE mapping_generation SET value = :value, token = :token"),
            {"value": generation[0], "token": generation[1]},
        )
        connection.execute(text("ALTER TABLE mappings ENABLE TRIGGER USER"))


def _generation(url: str) -> tuple[int, str]:
    with db.make_engine(url).connect() as connection:
        value, token = connection.execute(text("SELECT value, token FROM mapping_generation")).one()
    return int(value), str(token)


def test_a_restored_backup_and_a_count_moved_back_are_read(url: str) -> None:
    """An older backup restored, then a second writer's write brings the count back to
    the value this store cached: the rows are read anew."""
    store = open_store(url, upgrade=True)
    store.save_row(MappingRow("a", "ns", "pod-a", MappingState.RUNNING, T0, T0))
    backup = _generation(url)
    store.save_row(MappingRow("c", "ns", "pod-c", MappingState.RUNNING, T0, T0))
    assert {r.pod_uid for r in store.load_rows()} == {"a", "c"}  # cached
    cached = _generation(url)[0]
    _restore(url, [("a", "pod-a")], backup)
    other = open_store(url, upgrade=False)
    other.save_row(MappingRow("d", "ns", "pod-d", MappingState.RUNNING, T0, T0))
    assert _generation(url)[0] == cached  # the value cached, over other rows
    assert {r.pod_uid for r in store.load_rows()} == {"a", "d"}


def test_rows_newer_than_their_generation_are_not_kept_under_it(url: str) -> None:
    """A write that lands between the generation's read and the rows' (each statement
    its own snapshot) leaves rows newer than that generation: they are not cached under
    it, so a restore of that very generation is read."""
    store = open_store(url, upgrade=True)
    store.save_row(MappingRow("a", "ns", "pod-a", MappingState.RUNNING, T0, T0))
    before = _generation(url)
    engine = store_engine(store)
    landed = []

    @event.listens_for(engine, "before_cursor_execute")
    def write_first(_c: object, _cur: object, statement: str, *_rest: object) -> None:
        if "FROM mappings" in statement and not landed:
            landed.append(True)
            writer = open_store(url, upgrade=False)
            writer.save_row(MappingRow("x", "ns", "pod-x", MappingState.RUNNING, T0, T0))

    assert {r.pod_uid for r in store.load_rows()} == {"a", "x"}
    event.remove(engine, "before_cursor_execute", write_first)
    _restore(url, [("a", "pod-a")], before)
    assert {r.pod_uid for r in store.load_rows()} == {"a"}


def store_engine(store: Store) -> Engine:
    bind = store._sessions.kw["bind"]
    assert isinstance(bind, Engine)
    return bind


def test_two_nodes_on_one_database_leave_each_other_alone(url: str) -> None:
    """Several nodes on one PostgreSQL database, each with its own rows and lock."""
    with Sandbox(FAST, database_url=url) as box:
        two_nodes_leave_each_other_alone(box)
