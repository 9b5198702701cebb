"""Undated clusters' first sightings in the state store: each is kept as first written,
a new process on the same database still knows it, and one left out of the next keep is
forgotten."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.runtime.process.wiring import open_store

T0 = datetime(2026, 5, 1, tzinfo=UTC)
LATER = T0 + timedelta(minutes=5)


def test_a_first_sighting_is_kept_across_a_restart_and_forgotten_once_left_out(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    store = open_store(url, upgrade=True)
    assert store.listed_clusters.first_listed() == {}
    store.listed_clusters.keep({"cluster_a": T0})
    restarted = open_store(url, upgrade=False)
    assert restarted.listed_clusters.first_listed() == {"cluster_a": T0}
    restarted.listed_clusters.keep({"cluster_a": T0, "cluster_b": LATER})
    assert restarted.listed_clusters.first_listed() == {"cluster_a": T0, "cluster_b": LATER}
    restarted.listed_clusters.keep({"cluster_b": LATER})
    assert restarted.listed_clusters.first_listed() == {"cluster_b": LATER}
