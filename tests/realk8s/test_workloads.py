"""What the real controllers do with our pods: an Indexed Job made by the real Job
controller runs as one Instant Cluster (and completes when a pod of it is deleted after
its rank 0 exited 0: the real controller replaces that pod at once; with a claim, on its
network volume), a claim is bound by the real PV controller after the real scheduler
selected our node for it, and a pod no node can take is offloaded."""

from __future__ import annotations

from typing import Any

import yaml

from tests.realk8s.test_pods import TOLERATE
from tests.realk8s.world import NODE, World


def pods_of(world: World, job: str) -> list[dict[str, Any]]:
    listed = world.kubectl("get", "pods", "-l", f"job-name={job}", "-o", "yaml").stdout
    return list(yaml.safe_load(listed)["items"])


def indexed_job(
    world: World, name: str, backoff_limit: int, claim: str | None = None
) -> list[dict[str, Any]]:
    """An Indexed Job of two pods run as one Instant Cluster, each mounting `claim` at
    /checkpoints if given; its pods once both run."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "python:3.11",
        "command": ["sh", "-c", "torchrun train.py"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    volumes = []
    if claim is not None:
        container["volumeMounts"] = [{"name": "ckpt", "mountPath": "/checkpoints"}]
        volumes = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": claim}}]
    world.apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "completionMode": "Indexed",
                "completions": 2,
                "parallelism": 2,
                "backoffLimit": backoff_limit,
                "template": {
                    "metadata": {"annotations": {"runpod.io/cluster": "true"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": {"type": "virtual-kubelet"},
                        "tolerations": TOLERATE,
                        "containers": [container],
                        "volumes": volumes,
                    },
                },
            },
        }
    )

    def both_running() -> list[dict[str, Any]] | None:
        pods = pods_of(world, name)
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return pods if len(pods) == 2 and len(running) == 2 else None

    return world.wait_for("both members to run", both_running, timeout=120)


def test_an_indexed_job_runs_as_one_instant_cluster(world: World) -> None:
    pods = indexed_job(world, "torchrun", backoff_limit=0)
    clusters = list(world.runpod.clusters.values())
    assert len(clusters) == 1, clusters
    ranks = sorted(p["metadata"]["annotations"]["runpod.io/rank"] for p in pods)
    assert ranks == ["0", "1"]
    assert {p["metadata"]["annotations"]["runpod.io/cluster-id"] for p in pods} == {
        clusters[0]["id"]
    }
    world.kubectl("delete", "job", "torchrun", "--cascade=foreground", "--timeout=120s")
    world.wait_for("the cluster to be gone", lambda: not world.runpod.clusters, timeout=90)


def test_a_member_deleted_after_rank_0_exited_0_still_completes_the_job(world: World) -> None:
    pods = indexed_job(world, "finished", backoff_limit=2)
    [rank_0] = [
        m["id"]
        for m in world.runpod.instances.values()
        if "cluster" in m and m["cluster"]["rank"] == 0
    ]
    world.runpod.exit_process(rank_0, 0)
    world.kubectl("delete", "pod", sorted(p["metadata"]["name"] for p in pods)[1], "--wait=false")

    def complete() -> dict[str, Any] | None:
        job = world.get("job", "finished") or {}
        conditions = (job.get("status") or {}).get("conditions") or []
        return job if any(c["type"] == "Complete" for c in conditions) else None

    job = world.wait_for("the Job to complete", complete, timeout=150)
    assert job["status"]["completedIndexes"] == "0,1"
    assert job["status"]["failed"] == 1  # the deleted pod, replaced at once
    posts = [r for r in world.runpod.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    assert len(posts) == 1  # the training never ran again
    world.wait_for("the cluster to be gone", lambda: not world.runpod.clusters, timeout=90)


CLAIM = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: NAME, namespace: default}
spec:
  storageClassName: runpod-network-volume
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 20G}}
"""


def test_an_indexed_job_with_a_claim_runs_as_one_cluster_on_its_volume(world: World) -> None:
    """The real Job controller makes the pods, the real scheduler selects our node for the
    WaitForFirstConsumer claim, the real PV controller binds what we provisioned, and the
    cluster mounts the volume on every member."""
    world.apply(CLAIM.replace("NAME", "gang-checkpoints"))
    indexed_job(world, "ckpt-train", backoff_limit=0, claim="gang-checkpoints")
    claim = world.get("pvc", "gang-checkpoints") or {}
    assert claim["status"]["phase"] == "Bound"
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == NODE
    [volume_id] = world.runpod.volumes
    [post] = [r for r in world.runpod.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    assert post.body["mounts"] == {"network": [{"volumeId": volume_id, "path": "/checkpoints"}]}
    [cluster] = world.runpod.clusters.values()
    assert [post.body["dataCenterIds"]] == [[cluster["dataCenterId"]]]
    world.kubectl("delete", "job", "ckpt-train", "--cascade=foreground", "--timeout=120s")
    world.wait_for("the cluster to be gone", lambda: not world.runpod.clusters, timeout=90)
    world.kubectl("delete", "pvc", "gang-checkpoints", "--wait=false")


def test_a_claim_is_bound_by_the_real_pv_controller(world: World) -> None:
    world.apply(CLAIM.replace("NAME", "checkpoints"))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer",
            "namespace": "default",
            "annotations": {"runpod.io/datacenter-ids": "US-TX-3"},
        },
        "spec": {
            "nodeSelector": {"type": "virtual-kubelet"},
            "tolerations": TOLERATE,
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    "volumeMounts": [{"name": "ckpt", "mountPath": "/checkpoints"}],
                }
            ],
            "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}}],
        },
    }
    world.apply(pod)
    claim = world.wait_for(
        "the claim to be Bound",
        lambda: (
            (c := world.get("pvc", "checkpoints")) and c["status"].get("phase") == "Bound" and c
        ),
        timeout=120,
    )
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == NODE
    volume = world.get("pv", claim["spec"]["volumeName"], namespace="") or {}
    assert volume["status"]["phase"] == "Bound"
    assert len(world.runpod.volumes) == 1
    running = world.wait_for(
        "the pod to run",
        lambda: (p := world.get("pod", "trainer")) and p["status"].get("phase") == "Running" and p,
        timeout=120,
    )
    assert world.instance_for(running) is not None
    [volume_id] = world.runpod.volumes
    [body] = [r.body for r in world.runpod.requests if (r.method, r.path) == ("POST", "/v2/pods")]
    assert body["mounts"] == {"network": [{"volumeId": volume_id, "path": "/checkpoints"}]}


def test_a_pod_no_node_can_take_is_offloaded(world: World) -> None:
    world.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "overflow",
                "namespace": "default",
                "annotations": {"runpod.io/managed": "true", "runpod.io/offload": "true"},
            },
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "python:3.11",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ]
            },
        }
    )
    pod = world.wait_for(
        "the pod to be offloaded and run",
        lambda: (p := world.get("pod", "overflow")) and p["status"].get("phase") == "Running" and p,
        timeout=120,
    )
    assert pod["spec"]["nodeName"] == NODE
