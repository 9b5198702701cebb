"""A gang's end is on its pods before its cluster goes (docs/architecture.md §4, "Finished
work never runs again"), as a single pod's end is on the pod before its instance goes:
rank 0 exits 0, then the process dies right after the cluster's DELETE, or the API server
refuses the pods' status patches once, and the database is lost. The pods still end
Succeeded, the Job completes, and no second cluster runs the training again. Pods that
never got their cluster's annotation (every patch refused) get the end recorded in their
gang's row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.demo.sandbox import Sandbox

from .crashing import crash_in

STATUS = "/api/v1/namespaces/*/pods/*/status"
TRAIN_PODS = "/api/v1/namespaces/default/pods/train-*"
INTERVAL = 60


def delete_database(box: Sandbox) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(box.workdir / "reconciler.db") + suffix).unlink(missing_ok=True)


def cluster_posts(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters"))


def cluster_deletes(box: Sandbox) -> list[str]:
    return [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]


def rank_0(box: Sandbox) -> str:
    [member] = [
        m["id"]
        for m in box.runpod_sim.instances.values()
        if "cluster" in m and m["cluster"]["rank"] == 0
    ]
    return member


def running_gang(box: Sandbox) -> None:
    box.add_indexed_job("train", 2, backoff_limit=0)
    box.tick()
    box.advance(30)
    box.tick()
    assert [p["status"]["phase"] for p in box.job_pods("train")] == ["Running", "Running"]


def job_conditions(box: Sandbox) -> set[str]:
    job = box.kube_sim.get("jobs", "default", "train")
    assert job is not None
    return {
        c["type"]
        for c in (job.get("status") or {}).get("conditions") or []
        if c["status"] == "True"
    }


def settle(box: Sandbox, ticks: int = 4) -> None:
    for _ in range(ticks):
        box.advance(box.settings.timing.create_grace_time + 1)
        box.tick()


def succeeded_once(box: Sandbox) -> None:
    pods: list[dict[str, Any]] = box.job_pods("train")
    assert [p["status"]["phase"] for p in pods] == ["Succeeded", "Succeeded"], [
        (p["status"].get("reason"), p["status"].get("message")) for p in pods
    ]
    assert "Complete" in job_conditions(box)
    assert cluster_posts(box) == 1  # the training never ran again
    assert box.runpod_sim.clusters == {}


@pytest.mark.parametrize("point", ["after-cluster-deleting", "after-cluster-delete"])
def test_a_crash_around_the_delete_and_a_lost_database_keep_the_success(
    box: Sandbox, point: str
) -> None:
    running_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(INTERVAL)
    crash_in(box, point)
    delete_database(box)
    box.restart()
    settle(box)
    succeeded_once(box)


def test_refused_status_patches_keep_the_cluster_until_the_pods_show_the_end(
    box: Sandbox,
) -> None:
    running_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(INTERVAL)
    box.kube_sim.inject_fault("PATCH", STATUS, 409, count=2)
    box.tick()
    assert cluster_deletes(box) == []  # the pods do not show the end yet: the cluster stays
    delete_database(box)
    box.restart()
    settle(box)
    succeeded_once(box)
    assert len(cluster_deletes(box)) == 1


def test_pods_never_annotated_get_their_gangs_recorded_end(box: Sandbox) -> None:
    """The API server refused every patch of the gang's pods from the start, so none
    shows its cluster (`runpod.io/cluster-id`) when rank 0's exit 0 is read and recorded
    in the gang's row: on the first tick it takes patches again, the pods get that end
    from the row (never shown Running by the mirror of a cluster whose gang ended), and
    the cluster goes at once."""
    box.add_indexed_job("train", 2, backoff_limit=0)
    box.kube_sim.inject_fault("PATCH", TRAIN_PODS, 500, count=10_000)
    box.tick()
    box.advance(31)
    box.tick()  # the cluster is listed; mirroring it on the pods fails
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(INTERVAL)
    box.tick()  # rank 0's 0 read and recorded; the pods refuse it: the cluster stays
    assert cluster_deletes(box) == []
    pods = box.job_pods("train")
    assert not [p for p in pods if "runpod.io/cluster-id" in p["metadata"]["annotations"]]
    while box.kube_sim.take_fault("PATCH", f"/api/v1/namespaces/default/pods/{pod_name(pods)}"):
        pass  # the API server takes patches again
    box.tick()
    assert [p["status"]["phase"] for p in box.job_pods("train")] == ["Succeeded", "Succeeded"]
    assert len(cluster_deletes(box)) == 1


def pod_name(pods: list[dict[str, Any]]) -> str:
    return str(pods[0]["metadata"]["name"])
