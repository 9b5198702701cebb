"""Two clusters for one gang (another writer, on a database of its own, made a second
while the list lagged): the heal keeps the cluster the gang's pods record, checked
against RunPod's list and our tags, as a duplicate instance's heal keeps the one the
pod's `runpod.io/pod-id` names; never the running gang's cluster because a database
names the other (docs/architecture.md §4, "Duplicates heal")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests

from reconciler.demo.sandbox import API_KEY, Sandbox


def cluster_deletes(box: Sandbox) -> list[str]:
    return [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]


def test_the_heal_keeps_the_cluster_the_pods_run_on(box: Sandbox) -> None:
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(30)
    box.tick()
    [running] = box.runpod_sim.clusters
    pods = box.job_pods("train")
    assert {p["metadata"]["annotations"]["runpod.io/cluster-id"] for p in pods} == {running}
    [post] = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    # The other writer's create of the same gang, recorded in its own database.
    body: dict[str, Any] = dict(post.body)
    with requests.Session() as api:
        api.headers["Authorization"] = f"Bearer {API_KEY}"
        made = api.post(f"{box.runpod_sim.base_url}/v2/clusters", json=body)
    second = str(made.json()["id"])
    [row] = box.store.load_clusters()
    for suffix in ("", "-wal", "-shm"):
        Path(str(box.workdir / "reconciler.db") + suffix).unlink(missing_ok=True)
    box.restart()
    writes = box.store.batch()
    writes.save_cluster(row.changed(cluster_id=second))
    writes.commit()
    for _ in range(3):
        box.advance(box.settings.timing.create_grace_time + 1)
        box.tick()
    assert cluster_deletes(box) == [f"/v2/clusters/{second}"]
    assert list(box.runpod_sim.clusters) == [running]
    assert [p["status"]["phase"] for p in box.job_pods("train")] == ["Running", "Running"]
