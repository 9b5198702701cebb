"""KubeClient pod operations over HTTP against the simulator: paginated listing by node,
offload candidates, status and annotation patches, binding, the kubelet-style delete
(UID precondition, deletionTimestamp flow), owning Jobs, and the error mapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.errors import (
    KubeConflict,
    KubeInvalid,
    KubeNotFound,
    KubeServerError,
    KubeTransportError,
)
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.simulator import KubeSimulator

PodFactory = Callable[..., dict[str, Any]]

NODE = "virtual-runpod"


def test_list_node_pods_pages_through_every_pod_once(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    for i in range(1200):
        make_pod(f"gpu-{i:04d}", namespace="default" if i % 2 else "kube-public", node=NODE)
    make_pod("elsewhere", node="real-node")
    make_pod("unscheduled")

    pods = kube.pods.list_on_node(NODE, page_size=500)

    names = [p["metadata"]["name"] for p in pods]
    assert len(names) == 1200 == len(set(names))
    assert all(p["spec"]["nodeName"] == NODE for p in pods)
    lists = [(q, status) for method, path, q, status in sim.requests if path == "/api/v1/pods"]
    assert len(lists) == 3
    assert all("limit=500" in q and status == 200 for q, status in lists)
    assert ["continue=" in q for q, _ in lists] == [False, True, True]


def test_list_pending_managed_pods_returns_only_unscheduled_pending_pods(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    make_pod("waiting")
    make_pod("bound", node=NODE)
    finished = make_pod("finished")
    sim.put("pods", {**finished, "status": {"phase": "Succeeded"}})

    pending = kube.pods.list_pending()

    assert [p["metadata"]["name"] for p in pending] == ["waiting"]


def test_patch_pod_status_merges_conditions_by_type(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    make_pod("p", node=NODE)
    sim.make_unschedulable("default", "p")

    kube.pods.patch_status(
        "default",
        "p",
        {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0}],
        },
    )

    pod = sim.get("pods", "default", "p")
    assert pod is not None
    assert pod["status"]["phase"] == "Running"
    types = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert types == {"PodScheduled": "False", "Ready": "True"}
    assert pod["status"]["containerStatuses"][0]["ready"] is True


def test_patch_pod_annotations_sets_and_removes_keys(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    make_pod("p", node=NODE, annotations={"keep": "me", "runpod.io/pod-id": "old"})

    kube.pods.patch_annotations(
        "default", "p", {"runpod.io/pod-id": None, "runpod.io/gpu-type": "A100"}
    )

    pod = sim.get("pods", "default", "p")
    assert pod is not None
    assert pod["metadata"]["annotations"] == {"keep": "me", "runpod.io/gpu-type": "A100"}


def test_user_delete_of_a_bound_pod_waits_for_the_kubelet_finish(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
    clock: SimClock,
) -> None:
    uid = make_pod("p", node=NODE)["metadata"]["uid"]

    sim.delete_pod("default", "p", grace_seconds=30)
    clock.advance(5)
    terminating = kube.pods.list_on_node(NODE)

    assert terminating[0]["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:30Z"
    assert terminating[0]["metadata"]["deletionGracePeriodSeconds"] == 30
    kube.pods.delete("default", "p", uid)
    assert sim.get("pods", "default", "p") is None
    kube.pods.delete("default", "p", uid)  # already gone: success


def test_delete_pod_spares_a_pod_recreated_under_the_same_name(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    old_uid = make_pod("p")["metadata"]["uid"]
    sim.delete_pod("default", "p")  # unbound: gone at once
    new_uid = make_pod("p", node=NODE)["metadata"]["uid"]

    with pytest.raises(KubeConflict, match="Precondition failed"):
        kube.pods.delete("default", "p", old_uid)

    pod = sim.get("pods", "default", "p")
    assert pod is not None and pod["metadata"]["uid"] == new_uid


def test_bind_pod_assigns_the_node_once(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    uid = make_pod("p")["metadata"]["uid"]
    sim.make_unschedulable("default", "p")

    kube.pods.bind("default", "p", uid, NODE)

    pod = sim.get("pods", "default", "p")
    assert pod is not None and pod["spec"]["nodeName"] == NODE
    assert {"type": "PodScheduled", "status": "True"}.items() <= pod["status"]["conditions"][
        0
    ].items()
    with pytest.raises(KubeConflict, match="already assigned"):
        kube.pods.bind("default", "p", uid, "other")
    with pytest.raises(KubeConflict, match="Precondition failed"):
        kube.pods.bind("default", "p", "not-the-uid", NODE)


def test_owning_job_follows_the_owner_reference_and_checks_its_uid(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    job = sim.put(
        "jobs",
        {
            "metadata": {
                "name": "train",
                "namespace": "default",
                "annotations": {"runpod.io/managed": "true"},
            },
            "spec": {"template": {"spec": {"containers": []}}},
        },
    )
    ref = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    pod = make_pod("train-abcde", ownerReferences=[ref])
    stale = make_pod("train-old", ownerReferences=[{**ref, "uid": "a-deleted-job"}])

    owner = kube.jobs.owning(pod)

    assert owner is not None and owner["metadata"]["annotations"]["runpod.io/managed"] == "true"
    assert kube.jobs.owning(stale) is None
    assert kube.jobs.owning(make_pod("standalone")) is None
    assert kube.jobs.get("default", "missing") is None


def test_api_errors_become_adapter_errors(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    with pytest.raises(KubeNotFound) as missing:
        kube.pods.patch_annotations("default", "nope", {"a": "b"})
    assert missing.value.status == 404 and 'pods "nope" not found' in missing.value.message

    make_pod("p")
    sim.inject_fault("PATCH", "/api/v1/namespaces/default/pods/p", 500)
    with pytest.raises(KubeServerError) as failed:
        kube.pods.patch_annotations("default", "p", {"a": "b"})
    assert failed.value.status == 500

    with pytest.raises(KubeInvalid) as invalid:
        kube.pods.patch_annotations("default", "p", {"a": 1})  # type: ignore[dict-item]
    assert invalid.value.status == 400


def test_an_unreachable_server_is_a_transport_error(sim: KubeSimulator, clock: SimClock) -> None:
    client = KubeClient(sim.api_client(), now=clock.now, timeout=(1.0, 1.0))
    sim.stop()

    with pytest.raises(KubeTransportError):
        client.cluster.uid()


def _claim_pod(name: str, node: str | None) -> dict[str, Any]:
    """A pod with a claim, a ConfigMap and a projected volume of its own, each mounted."""
    own_projection = {"sources": [{"downwardAPI": {"items": [{"path": "labels"}]}}]}
    mounts = [
        {"name": "data", "mountPath": "/data"},
        {"name": "settings", "mountPath": "/etc/settings"},
        {"name": "podinfo", "mountPath": "/etc/podinfo"},
    ]
    spec: dict[str, Any] = {
        "initContainers": [{"name": "fetch", "image": "busybox:1.36", "volumeMounts": mounts}],
        "containers": [{"name": "main", "image": "busybox:1.36", "volumeMounts": mounts}],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "settings", "configMap": {"name": "settings"}},
            {"name": "podinfo", "projected": own_projection},
        ],
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_listed_pods_come_without_the_service_account_token_volume_nothing_reads(
    sim: KubeSimulator, kube: KubeClient
) -> None:
    """The API server's ServiceAccount admission adds a token volume to every pod, mounted
    in every container: a third of a pod's memory, read by nothing. A list keeps
    everything else of the pod, the other volumes and their mounts in order."""
    sim.create_pod(_claim_pod("bound", NODE))
    sim.create_pod(_claim_pod("waiting", None))
    stored = sim.get("pods", "default", "bound")
    assert stored is not None
    added = [v["name"] for v in stored["spec"]["volumes"]][3:]
    assert [name[:16] for name in added] == ["kube-api-access-"]  # the admission's

    for listed in (*kube.pods.list_on_node(NODE), *kube.pods.list_pending()):
        spec = listed["spec"]
        assert [v["name"] for v in spec["volumes"]] == ["data", "settings", "podinfo"]
        for container in (*spec["initContainers"], *spec["containers"]):
            paths = [m["mountPath"] for m in container["volumeMounts"]]
            assert paths == ["/data", "/etc/settings", "/etc/podinfo"]
    bound = kube.pods.list_on_node(NODE)[0]
    assert bound["status"] == stored["status"]
    assert bound["metadata"] == stored["metadata"]
    mounting = ("volumes", "initContainers", "containers")
    assert {k: v for k, v in bound["spec"].items() if k not in mounting} == {
        k: v for k, v in stored["spec"].items() if k not in mounting
    }


def test_a_pod_with_only_the_token_volume_is_listed_without_volumes(
    kube: KubeClient, make_pod: PodFactory
) -> None:
    """As the API server shows a pod with none: no empty `volumes` or `volumeMounts`."""
    make_pod("plain", node=NODE)

    (listed,) = kube.pods.list_on_node(NODE)

    assert "volumes" not in listed["spec"]
    assert "volumeMounts" not in listed["spec"]["containers"][0]
