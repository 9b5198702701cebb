"""The state store on PostgreSQL, the database for more than one replica: the migrations
apply (also from replicas starting together), a pod's whole life runs through the engine
with its rows there, deleting the rows rebuilds them without a second create, and the
writer lock refuses a second writer.

Runs against RECONCILER_TEST_POSTGRES_URL, else a throwaway server from Debian's
postgresql package; skipped, with the reason, when neither can be had (a failure where
CI is set: tests/needs.py).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from reconciler.adapters.store import db, migrate
from reconciler.core.mapping import MappingRecord, MappingState
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.wiring import LOCK_NAME, LOCK_TTL, open_store
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
    store.save_row(MappingRecord("a", "ns", "pod-a", MappingState.RUNNING, T0, T0))
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


def test_two_nodes_on_one_database_leave_each_other_alone(url: str) -> None:
    """Several nodes on one PostgreSQL database, each with its own rows and lock."""
    with Sandbox(FAST, database_url=url) as box:
        two_nodes_leave_each_other_alone(box)
