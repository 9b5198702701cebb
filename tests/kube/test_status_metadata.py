"""What the pods/status subresource keeps, as the API server's pod status strategy does:
the status and metadata such as annotations and labels go through, while spec,
deletionTimestamp and ownerReferences are reset to the stored object's. Other
resources' status subresource keeps changing status only. Exercised with the official
client's typed API over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from reconciler.adapters.kube.client import KubeClient
from reconciler.sim.kube.simulator import KubeSimulator

STRATEGIC = "application/strategic-merge-patch+json"


@pytest.fixture
def core(sim: KubeSimulator) -> Iterator[client.CoreV1Api]:
    with sim.api_client() as api_client:
        yield client.CoreV1Api(api_client)


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {"team": "a"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid"}
            ],
        },
        "spec": {
            "nodeName": "virtual-runpod",
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }


def test_a_pod_status_patch_keeps_the_annotations_it_carries(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    sim.create_pod(_pod("p"))
    core.patch_namespaced_pod_status(
        "p",
        "default",
        {
            "metadata": {"annotations": {"runpod.io/pod-id": "abc"}, "labels": {"x": "1"}},
            "status": {"phase": "Running"},
        },
        _content_type=STRATEGIC,
    )
    pod = sim.get("pods", "default", "p") or {}
    assert pod["status"]["phase"] == "Running"
    assert pod["metadata"]["annotations"] == {"team": "a", "runpod.io/pod-id": "abc"}
    assert pod["metadata"]["labels"] == {"x": "1"}


def test_a_pod_status_patch_cannot_touch_spec_or_owners(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    sim.create_pod(_pod("p"))
    core.patch_namespaced_pod_status(
        "p",
        "default",
        {
            "metadata": {"ownerReferences": None, "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"activeDeadlineSeconds": 5},
            "status": {"phase": "Running"},
        },
        _content_type=STRATEGIC,
    )
    pod = sim.get("pods", "default", "p") or {}
    assert pod["status"]["phase"] == "Running"
    assert "activeDeadlineSeconds" not in pod["spec"]
    assert [ref["uid"] for ref in pod["metadata"]["ownerReferences"]] == ["job-uid"]
    assert "deletionTimestamp" not in pod["metadata"]


def test_the_adapter_writes_status_and_annotations_in_one_request(
    sim: KubeSimulator, kube: KubeClient
) -> None:
    sim.create_pod(_pod("p"))
    sim.requests.clear()
    kube.pods.patch_status("default", "p", {"phase": "Running"}, {"runpod.io/pod-id": "abc"})
    assert [(method, path) for method, path, _q, _s in sim.requests] == [
        ("PATCH", "/api/v1/namespaces/default/pods/p/status")
    ]
    pod = sim.get("pods", "default", "p") or {}
    assert pod["metadata"]["annotations"]["runpod.io/pod-id"] == "abc"
