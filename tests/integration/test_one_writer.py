"""One writer per virtual node: two `sync --once` processes with their own
databases, started together against the same cluster, never both act. Each holds the
node's writer Lease while it acts, so the other is refused with a one-line error naming
the holder, or runs after it and adopts what the first created: one create per pod, one
instance per pod, no pod Failed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.chaos.ticks import Reconciler, TickPlan
from tests.chaos.world import Snapshot, phase, pod_manifest, sim_host

NODE = "writers"
GRACE = 60.0
"""The create grace of the writers that meet a killed writer's create: longer than the
list's lag, as the hold after a takeover lasts it."""
PODS = 10


def test_two_once_writers_with_their_own_databases_make_one_instance_per_pod(
    tmp_path: Path,
) -> None:
    with sim_host(tmp_path) as host:
        host.ensure_namespace("ml")
        for index in range(PODS):
            host.create_pod(pod_manifest("ml", f"train-{index}", NODE, batch=False))
        writers = (
            Reconciler(host, tmp_path, NODE, "cluster-w"),
            Reconciler(host, tmp_path, NODE, "cluster-w", database="second"),
        )
        for _ in range(3):
            with ThreadPoolExecutor(len(writers)) as pool:
                results = list(pool.map(lambda w: w.tick(TickPlan()), writers))
            for writer, result in zip(writers, results, strict=True):
                if result.returncode != 0:  # refused: one line naming the holder
                    assert result.returncode == 1, writer.log_tail()
                    error = writer.log_tail(2).splitlines()[0]
                    assert error.startswith("Error: another reconciler ("), writer.log_tail()
                    assert "acts for node writers" in error
        snapshot = Snapshot.take(host, writers[0].owner, NODE)
        assert snapshot.duplicates() == {}
        assert sorted(len(snapshot.owned[uid]) for uid in snapshot.pods) == [1] * PODS
        assert [p["metadata"]["name"] for p in snapshot.pods.values() if phase(p) == "Failed"] == []
        creates = [
            r for r in host.runpod_requests() if r["method"] == "POST" and r["path"] == "/v2/pods"
        ]
        assert len(creates) == PODS


def test_a_writer_taking_over_from_a_killed_one_does_not_create_its_instance_again(
    tmp_path: Path,
) -> None:
    """The duplicate a chaos campaign found: a writer is killed just after RunPod made an
    instance, before it recorded anything; the next writer, on its own database, takes the
    dead process's Lease at once, and RunPod's list does not show the instance yet. It must
    hold its creates for the create grace (the list's lag is within it) instead of
    creating a second, billing instance."""
    with sim_host(tmp_path) as host:
        host.ensure_namespace("ml")
        host.create_pod(pod_manifest("ml", "train-0", NODE, batch=False))
        host.runpod("POST", "listing-lag", {"seconds": 30})  # new instances stay unlisted
        killed = Reconciler(host, tmp_path, NODE, "cluster-w", create_grace=GRACE)
        successor = Reconciler(
            host, tmp_path, NODE, "cluster-w", database="second", create_grace=GRACE
        )

        assert killed.tick(TickPlan(crash_at="after-create:1")).crashed
        held = successor.tick(TickPlan())
        assert held.returncode == 0, successor.log_tail()
        assert "taking over the writer" in successor.log_tail(40)
        assert (held.report or {}).get("deferred_creates") == 1, held.report

        host.runpod("POST", "clock/advance", {"seconds": GRACE + 30})  # listed, the hold over
        assert successor.tick(TickPlan()).returncode == 0, successor.log_tail()
        snapshot = Snapshot.take(host, successor.owner, NODE)
        assert snapshot.duplicates() == {}
        assert [len(group) for group in snapshot.owned.values()] == [1]
        creates = [
            r for r in host.runpod_requests() if r["method"] == "POST" and r["path"] == "/v2/pods"
        ]
        assert len(creates) == 1


def test_chained_once_writers_inside_a_killed_writers_term_create_nothing_twice(
    tmp_path: Path,
) -> None:
    """A writer is killed just after RunPod made an instance that its list will not show
    for a while (within the create grace); `--once` writers follow, each on a fresh
    database. The first holds its creates for the create grace from its takeover and
    releases the Lease, passing the rest of the hold on in it; the next ones take the
    free Lease inside that hold, and must hold their creates too."""
    with sim_host(tmp_path) as host:
        host.ensure_namespace("ml")
        host.create_pod(pod_manifest("ml", "train-0", NODE, batch=False))
        host.runpod("POST", "listing-lag", {"seconds": 40})
        killed = Reconciler(host, tmp_path, NODE, "cluster-w", create_grace=GRACE)
        assert killed.tick(TickPlan(crash_at="after-create:1")).crashed
        for database in ("second", "third", "fourth"):
            successor = Reconciler(
                host, tmp_path, NODE, "cluster-w", database=database, create_grace=GRACE
            )
            result = successor.tick(TickPlan())
            assert result.returncode == 0, successor.log_tail()
            assert (result.report or {}).get("deferred_creates") == 1, result.report
        creates = [
            r for r in host.runpod_requests() if r["method"] == "POST" and r["path"] == "/v2/pods"
        ]
        assert len(creates) == 1
