"""Pods and Jobs on the virtual node of a real control plane: the real scheduler places
them, their status passes the real API server's validation, the real node lifecycle
controller judges the node's Lease, and deleting a pod ends its instance."""

from __future__ import annotations

import yaml

from tests.realk8s.world import NODE, World

TOLERATE = [
    {
        "key": "virtual-kubelet.io/provider",
        "operator": "Equal",
        "value": "runpod",
        "effect": "NoSchedule",
    }
]


def gpu_pod(name: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"runpod.io/max-price": "3.00"},
        },
        "spec": {
            "nodeSelector": {"type": "virtual-kubelet"},
            "tolerations": TOLERATE,
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "ports": [{"containerPort": 8888}],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            **spec,
        },
    }


def test_the_node_registers_and_keeps_its_lease(world: World) -> None:
    node = world.get("node", NODE, namespace="")
    assert node is not None
    assert node["metadata"]["labels"]["type"] == "virtual-kubelet"
    assert {"key": "virtual-kubelet.io/provider", "value": "runpod", "effect": "NoSchedule"} in [
        {k: t[k] for k in ("key", "value", "effect")} for t in node["spec"]["taints"]
    ]
    lease = world.get("lease", NODE, namespace="kube-node-lease")
    assert lease is not None and lease["spec"]["holderIdentity"]
    # Past the node monitor's grace (8 s here) the Lease is still renewed, so the real
    # node lifecycle controller never taints the node unreachable.
    first = lease["spec"]["renewTime"]
    world.wait_for(
        "a renewed Lease",
        lambda: (
            (world.get("lease", NODE, namespace="kube-node-lease") or {})["spec"]["renewTime"]
            != first
        ),
        timeout=30,
    )
    taints = (world.get("node", NODE, namespace="") or {})["spec"].get("taints") or []
    assert not [t for t in taints if t["key"].startswith("node.kubernetes.io/")], taints


def test_a_scheduled_pod_runs_on_runpod_and_its_delete_ends_the_instance(world: World) -> None:
    world.apply(gpu_pod("notebook"))
    pod = world.wait_for(
        "the pod to run",
        lambda: (p := world.get("pod", "notebook")) and p["status"].get("phase") == "Running" and p,
    )
    assert pod["spec"]["nodeName"] == NODE  # placed by the real scheduler
    instance = world.instance_for(pod)
    assert instance is not None and instance["status"] == "RUNNING"
    assert pod["metadata"]["annotations"]["runpod.io/pod-id"] == instance["id"]
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "True"
    world.kubectl("delete", "pod", "notebook", "--timeout=90s")
    assert world.get("pod", "notebook") is None
    world.wait_for(
        "the instance to be gone", lambda: instance["id"] not in world.runpod.instances, timeout=30
    )


def test_a_job_runs_to_completion(world: World) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"type": "virtual-kubelet"},
                    "tolerations": TOLERATE,
                    "containers": [
                        {
                            "name": "train",
                            "image": "python:3.11",
                            "command": ["python", "train.py"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                }
            },
        },
    }
    world.apply(job)

    def running_instance() -> dict[str, object] | None:
        found = world.kubectl("get", "pods", "-l", "job-name=train", "-o", "yaml").stdout
        pods = yaml.safe_load(found)["items"]
        if pods and pods[0]["status"].get("phase") == "Running":
            return world.instance_for(pods[0])
        return None

    instance = world.wait_for("the Job's pod to run", running_instance)
    world.runpod.exit_process(str(instance["id"]), 0)
    finished = world.wait_for(
        "the Job to complete",
        lambda: (
            (j := world.get("job", "train")) and j.get("status", {}).get("succeeded") == 1 and j
        ),
    )
    assert any(
        c["type"] == "Complete" and c["status"] == "True" for c in finished["status"]["conditions"]
    )
    world.wait_for(
        "the instance to be gone", lambda: instance["id"] not in world.runpod.instances, timeout=60
    )
