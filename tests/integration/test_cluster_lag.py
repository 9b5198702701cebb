"""One cluster per gang while RunPod's list lags behind an answered create
(docs/architecture.md §3, "Instant Clusters"; §4): a cluster is gone only once RunPod
answers 404 for it by id, never because the list omits it past the create grace; and a
`sync --once` run writes the answered create's cluster id on the gang's pods, so the next
run, on a database of its own, finds the cluster by id (checked against its members'
tags, never the annotation alone) instead of making a second one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import requests

from reconciler.core.contract import OWNER_ENV
from reconciler.demo.sandbox import API_KEY, Sandbox

LAG = 600  # ten minutes: far past the create grace


def cluster_posts(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters"))


def delete_database(box: Sandbox) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(box.workdir / "reconciler.db") + suffix).unlink(missing_ok=True)


def phases(box: Sandbox) -> list[str]:
    return [p["status"].get("phase", "") for p in box.job_pods("train")]


def test_a_cluster_the_list_omits_past_the_grace_is_not_gone(box: Sandbox) -> None:
    box.runpod_sim.account.set_listing_lag(LAG)
    box.add_indexed_job("train", 2)
    for _ in range(10):
        box.tick()
        box.advance(60)
    assert "Failed" not in phases(box)
    assert cluster_posts(box) == 1 and len(box.runpod_sim.clusters) == 1
    assert phases(box) == ["Running", "Running"]  # mirrored from the members read by id


def once_writer(box: Sandbox) -> None:
    """Wire the engine as `sync --once` with the writer Lease does: answered creates are
    written on their pods before the run ends (runtime/process/wiring.py)."""
    box.engine.hooks = dataclasses.replace(box.engine.hooks, annotate_created=True)


def test_once_runs_on_fresh_databases_make_one_cluster(box: Sandbox) -> None:
    box.runpod_sim.account.set_listing_lag(LAG)
    box.add_indexed_job("train", 2)
    once_writer(box)
    box.tick()
    [cluster_id] = box.runpod_sim.clusters
    annotations = [p["metadata"].get("annotations") or {} for p in box.job_pods("train")]
    assert {a.get("runpod.io/cluster-id") for a in annotations} == {cluster_id}
    for _ in range(4):
        delete_database(box)
        box.restart()
        once_writer(box)
        box.advance(30)
        box.tick()
    assert cluster_posts(box) == 1 and len(box.runpod_sim.clusters) == 1
    assert "Failed" not in phases(box)


def test_a_forged_cluster_id_finds_nothing_and_the_gang_gets_its_own(box: Sandbox) -> None:
    """The annotation only says where to look: a foreign cluster it names is not ours."""
    body = {
        "name": "someone-elses-training",
        "type": "TRAINING",
        "compute": {"gpuTypeId": "NVIDIA RTX A6000", "gpuCountPerPod": 1, "podCount": 2},
        "image": "python:3.11",
        "env": {OWNER_ENV: "someone-else/node"},
    }
    with requests.Session() as api:
        api.headers["Authorization"] = f"Bearer {API_KEY}"
        made = api.post(f"{box.runpod_sim.base_url}/v2/clusters", json=body)
    foreign = str(made.json()["id"])
    box.runpod_sim.account.set_listing_lag(LAG)  # ours will not be listed: only read by id
    box.add_indexed_job("train", 2)
    for pod in box.job_pods("train"):
        box.kube.pods.patch_annotations(
            "default", pod["metadata"]["name"], {"runpod.io/cluster-id": foreign}
        )
    box.tick()
    box.advance(30)
    box.tick()
    assert cluster_posts(box) == 2  # the foreign one, and the gang's own
    assert foreign in box.runpod_sim.clusters
    assert not [r for r in box.runpod_sim.requests if r.method == "DELETE"]


def test_a_cluster_id_the_pods_refused_passes_a_hold_on(box: Sandbox) -> None:
    """The `--once` writer could not write the new cluster's id on its pods: it counts
    the create as unrecorded, so the Lease it releases holds the next writer's creates
    (runtime/process/writer_lease.py) instead of letting a writer on another database make
    a second."""
    unrecorded: list[int] = []
    box.engine.hooks = dataclasses.replace(
        box.engine.hooks, annotate_created=True, unrecorded_creates=unrecorded.append
    )
    box.add_indexed_job("train", 2)
    box.kube_sim.inject_fault("PATCH", "/api/v1/namespaces/default/pods/train-*", 409, count=2)
    box.tick()
    assert len(box.runpod_sim.clusters) == 1
    assert unrecorded == [1]


def test_a_cluster_just_made_that_the_list_does_not_show_yet_is_waited_for(box: Sandbox) -> None:
    """Within the create grace an answered create's cluster may be neither listed nor found
    by id: the gang waits for it instead of judging it gone (its pods failed, and its Job
    making another cluster)."""
    box.runpod_sim.account.set_listing_lag(20)  # shorter than the create grace (30 s)
    box.add_indexed_job("train", 2)
    box.tick()
    # RunPod's own reads can lag a create too: its members' read answers 404 at first.
    box.runpod_sim.faults.inject("GET", "/v2/clusters/*/pods", 404, count=3)
    for _ in range(3):
        box.advance(5)
        box.tick()
    assert "Failed" not in phases(box)
    box.advance(20)
    box.tick()
    box.tick()
    assert cluster_posts(box) == 1 and len(box.runpod_sim.clusters) == 1
    assert phases(box) == ["Running", "Running"]
