"""A gang's pods carry `runpod.io/cluster-id` and `runpod.io/rank`, written by the tick
for people. A member's pod whose annotations are forged (an unknown cluster id, another
rank) is no failed member: the gang runs on, the cluster stays, and the tick writes the
annotations back from RunPod's record of the members."""

from __future__ import annotations

from reconciler.demo.sandbox import Sandbox


def test_forged_cluster_id_and_rank_on_one_member_change_nothing(box: Sandbox) -> None:
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(30)
    box.tick()
    pods = box.job_pods("train")
    shown = [p["metadata"]["annotations"] for p in pods]
    assert all(p["status"]["phase"] == "Running" for p in pods)
    name = pods[1]["metadata"]["name"]
    box.kube.patch_pod_annotations(
        "default", name, {"runpod.io/cluster-id": "forged", "runpod.io/rank": "0"}
    )
    deletes = len([r for r in box.runpod_sim.requests if r.method == "DELETE"])
    box.tick()
    box.tick()
    after = box.job_pods("train")
    assert all(p["status"]["phase"] == "Running" for p in after), [
        p["status"].get("reason") for p in after
    ]
    assert [p["metadata"]["annotations"] for p in after] == shown
    assert len([r for r in box.runpod_sim.requests if r.method == "DELETE"]) == deletes
