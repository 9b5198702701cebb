"""A pod's reason survives the store as its typed member; a reason this version does not
know (written by a newer one) reads back as none instead of breaking every tick."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.reasons import PodReason
from reconciler.runtime.process.wiring import open_store

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def test_a_reason_round_trips_as_its_member(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", upgrade=True)
    store.save_row(
        MappingRow(
            "uid-1",
            "ns",
            "pod",
            MappingState.PENDING,
            T0,
            T0,
            reason=PodReason.BUDGET_EXCEEDED,
            last_error="no room",
        )
    )
    [row] = store.load_rows()
    assert row.reason is PodReason.BUDGET_EXCEEDED


def test_an_unknown_stored_reason_reads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = open_store(f"sqlite:///{path}", upgrade=True)
    store.save_row(
        MappingRow(
            "uid-1", "ns", "pod", MappingState.PENDING, T0, T0, reason=PodReason.BUDGET_EXCEEDED
        )
    )
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE mappings SET reason = 'FromTheFuture'")
    [row] = store.load_rows()
    assert row.reason is None and row.state is MappingState.PENDING
