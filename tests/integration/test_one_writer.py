"""One writer per virtual node (issue 16): two `sync --once` processes with their own
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
