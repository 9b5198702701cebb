"""Undated clusters' first sightings in the state store: each keeps when a list first
showed it, a new process on the same database still knows it, and one no longer
listed is forgotten (a later sighting counts from then)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.runtime.wiring import open_store

T0 = datetime(2026, 5, 1, tzinfo=UTC)
LATER = T0 + timedelta(minutes=5)


def test_a_first_sighting_is_kept_across_a_restart_and_forgotten_once_unlisted(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    store = open_store(url, upgrade=True)
    assert store.listed_clusters.sighted({"cluster_a"}, T0) == {"cluster_a": T0}
    restarted = open_store(url, upgrade=False)
    both = restarted.listed_clusters.sighted({"cluster_a", "cluster_b"}, LATER)
    assert both == {"cluster_a": T0, "cluster_b": LATER}
    assert restarted.listed_clusters.sighted({"cluster_b"}, LATER) == {"cluster_b": LATER}
    assert restarted.listed_clusters.sighted({"cluster_a"}, LATER) == {"cluster_a": LATER}
