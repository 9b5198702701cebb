"""A gang's pods carry `runpod.io/cluster-id` and `runpod.io/rank`, written by the tick
for people. A member's pod whose annotations are forged (an unknown cluster id, another
rank) is no failed member: the gang runs on, the cluster stays, and the tick writes the
annotations back from RunPod's record of the members; a forged member id reads no
other instance's log."""

from __future__ import annotations

import pytest
import requests

from reconciler.demo.sandbox import Sandbox

pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


def test_forged_cluster_id_and_rank_on_one_member_change_nothing(box: Sandbox) -> None:
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(30)
    box.tick()
    pods = box.job_pods("train")
    shown = [p["metadata"]["annotations"] for p in pods]
    assert all(p["status"]["phase"] == "Running" for p in pods)
    name = pods[1]["metadata"]["name"]
    box.kube.pods.patch_annotations(
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


def test_a_forged_member_id_reads_no_other_instances_log() -> None:
    """`kubectl logs` of a gang pod reads its member's log; a pod-id forged to name
    another instance (a plain pod's, here) reads nothing of it."""
    with Sandbox(tls=True) as box:
        box.start_kubelet()
        box.add_pod("secret", command=["python", "serve.py"])
        box.add_indexed_job("train", 2)
        box.tick()
        box.advance(30)
        box.tick()
        other = box.instance_for(box.pod("secret") or {})
        assert other is not None
        box.runpod_sim.logs.write_container(other["id"], ["the other tenant's secret"])
        name = box.job_pods("train")[0]["metadata"]["name"]
        box.kube.pods.patch_annotations("default", name, {"runpod.io/pod-id": other["id"]})
        assert box.kubelet is not None
        answer = requests.get(
            f"https://127.0.0.1:{box.kubelet.port}/containerLogs/default/{name}/main",
            cert=box.kube_sim.kubelet_client_files(),
            verify=False,
            timeout=10,
        )
        assert "secret" not in answer.text, answer.text


def test_a_member_id_of_another_namespaces_gang_reads_nothing_of_it() -> None:
    """Tenant A's own gang pod names, in `runpod.io/pod-id`, a member of tenant B's
    cluster: a member of *a* gang of ours, but not of A's Job's, so nothing of B's log
    is read for A."""
    with Sandbox(tls=True) as box:
        box.start_kubelet()
        box.add_indexed_job("train", 2, namespace="tenant-a")
        box.add_indexed_job("train", 2, namespace="tenant-b")
        box.tick()
        box.advance(30)
        box.tick()
        [theirs] = [
            p["metadata"]["annotations"]["runpod.io/pod-id"]
            for p in box.job_pods("train", "tenant-b")
            if p["metadata"]["annotations"].get("runpod.io/rank") == "0"
        ]
        box.runpod_sim.logs.write_container(theirs, ["tenant b's secret"])
        name = box.job_pods("train", "tenant-a")[0]["metadata"]["name"]
        box.kube.pods.patch_annotations("tenant-a", name, {"runpod.io/pod-id": theirs})
        assert box.kubelet is not None
        answer = requests.get(
            f"https://127.0.0.1:{box.kubelet.port}/containerLogs/tenant-a/{name}/main",
            cert=box.kube_sim.kubelet_client_files(),
            verify=False,
            timeout=10,
        )
        assert "secret" not in answer.text, answer.text
