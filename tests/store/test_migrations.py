"""The Alembic migrations: upgrade from empty, downgrade and back, rows kept across the
mirror key revision, no drift from the models, and replicas starting together on one
database (each migrates before any holds the writer lock) all succeed."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.models import Base
from tests.store.upgrades import upgrade_at_once

TABLES = {"mappings", "ticks", "actions", "locks"}


def test_upgrade_from_empty_creates_every_table(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    migrate.upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= TABLES
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_processes_upgrading_one_database_at_once_all_succeed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    assert upgrade_at_once(url) == []  # without taking turns: "table locks already exists"
    engine = db.make_engine(url)
    assert migrate.current_revision(engine) == migrate.head_revision()
    assert set(inspect(engine).get_table_names()) >= TABLES


def test_downgrade_to_base_then_upgrade_again(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    migrate.upgrade(engine)
    migrate.downgrade(engine, "base")
    assert not TABLES & set(inspect(engine).get_table_names())
    assert migrate.current_revision(engine) is None
    migrate.upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= TABLES


def test_the_mirror_key_revision_keeps_the_rows(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    migrate.upgrade(engine, "0001_initial")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO mappings (pod_uid, namespace, name, state, orphan_sightings, "
                "created_at, updated_at) VALUES ('uid-1', 'ml', 'train', 'running', 0, "
                "'2026-11-21 00:00:00', '2026-11-21 00:00:00')"
            )
        )
    migrate.upgrade(engine)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT pod_uid, mirror_key FROM mappings")).all()
    assert [tuple(row) for row in rows] == [("uid-1", None)]
    migrate.downgrade(engine, "0001_initial")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT pod_uid FROM mappings")).scalars().all() == ["uid-1"]


def test_the_journal_resource_id_revision_keeps_the_rows(tmp_path: Path) -> None:
    """The journal's id column, renamed for what it holds (any resource's id): a row
    written before the rename is found under the new name, and back after a downgrade."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    migrate.upgrade(engine, "0019_listed_clusters")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO actions (kind, pod_uid, instance_id, started_at, finished_at, "
                "outcome) VALUES ('create-network-volume', 'uid-1', 'vol-1', "
                "'2026-12-07 00:00:00', '2026-12-07 00:00:01', 'ok')"
            )
        )
    migrate.upgrade(engine)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT kind, resource_id FROM actions")).all()
    assert [tuple(row) for row in rows] == [("create-network-volume", "vol-1")]
    migrate.downgrade(engine, "0019_listed_clusters")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT instance_id FROM actions")).scalars().all() == [
            "vol-1"
        ]


def test_models_match_the_migrations(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    migrate.upgrade(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_sqlite_connections_get_the_pragmas(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    with engine.connect() as connection:

        def pragma(name: str) -> object:
            return connection.exec_driver_sql(f"PRAGMA {name}").scalar()

        assert pragma("journal_mode") == "wal"
        assert pragma("foreign_keys") == 1
        assert pragma("synchronous") == 1  # NORMAL
        assert pragma("busy_timeout") == db.BUSY_TIMEOUT_MS
