"""The Kubernetes simulator's Job controller for NonIndexed Jobs, held to the real one
(kubernetes v1.37 pkg/controller/job/job_controller.go: syncJob, manageJob,
trackJobStatusAndRemoveFinalizers, enactJobFinished): it is the only maker of a Job's
pods. Pods from the template with generateName `<job>-`, the selector's labels and a
controller reference blocking owner deletion; `min(completions - succeeded,
parallelism)` active, a work queue (no completions) stops starting pods after one
success; extra active pods deleted; `status.startTime` on the first sync,
`active`/`ready`/`succeeded`/`failed`; past `backoffLimit` FailureTarget, the active
pods deleted, then Failed; `completions` succeeded and nothing active:
SuccessCriteriaMet then Complete with `completionTime`. All through the official
client; each test fails against a controller that skips its rule."""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest

from reconciler.sim.clock import SimClock
from reconciler.sim.kube.resources import PODS
from reconciler.sim.kube.simulator import KubeSimulator

MERGE = "application/merge-patch+json"


def job(name: str = "train", **spec: Any) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "train"}, "annotations": {"note": "kept"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": template, **spec},
    }


@pytest.fixture
def batch(sim: KubeSimulator) -> kubernetes.client.BatchV1Api:
    return kubernetes.client.BatchV1Api(sim.api_client())


def active(sim: KubeSimulator) -> list[dict[str, Any]]:
    return [
        pod
        for pod in sim.list("pods", "default")
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and "deletionTimestamp" not in pod["metadata"]
    ]


def write_status(sim: KubeSimulator, pod: dict[str, Any], status: dict[str, Any]) -> None:
    """The pod's kubelet writes its status (here, straight into the store)."""
    name = pod["metadata"]["name"]
    sim.store.patch(PODS, "default", name, MERGE, {"status": status}, "status")


def status(sim: KubeSimulator, name: str = "train") -> dict[str, Any]:
    return dict((sim.get("jobs", "default", name) or {}).get("status") or {})


def test_the_controller_makes_parallelism_pods_from_the_template(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api, clock: SimClock
) -> None:
    created = batch.create_namespaced_job("default", job(completions=3, parallelism=2))
    pods = active(sim)
    assert len(pods) == 2
    uid = created.metadata.uid
    for pod in pods:
        meta = pod["metadata"]
        assert meta["generateName"] == "train-" and meta["name"].startswith("train-")
        assert meta["labels"] == {
            "app": "train",
            "batch.kubernetes.io/controller-uid": uid,
            "controller-uid": uid,
            "batch.kubernetes.io/job-name": "train",
            "job-name": "train",
        }
        assert meta["annotations"] == {"note": "kept"}
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "train",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    first = status(sim)
    assert first["startTime"] == clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    # As the real v1.37 control plane writes it for the same Job (tests/realk8s plane).
    assert (first["active"], first["ready"], first["terminating"]) == (2, 0, 0)
    assert first["uncountedTerminatedPods"] == {}
    write_status(sim, pods[0], {"phase": "Running", "conditions": [_ready()]})
    assert status(sim)["ready"] == 1


def _ready() -> dict[str, str]:
    return {"type": "Ready", "status": "True"}


def test_completions_run_to_complete_with_no_more_pods_than_remain(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api, clock: SimClock
) -> None:
    batch.create_namespaced_job("default", job(completions=3, parallelism=2))
    started = status(sim)["startTime"]
    clock.advance(30)
    write_status(sim, active(sim)[0], {"phase": "Succeeded"})
    assert len(active(sim)) == 2 and status(sim)["succeeded"] == 1  # one more made
    for pod in active(sim):
        write_status(sim, pod, {"phase": "Succeeded"})
    # Three succeeded: min(completions - succeeded, parallelism) is 0, none made.
    assert active(sim) == [] and len(sim.list("pods", "default")) == 3
    done = status(sim)
    assert done["succeeded"] == 3 and "active" not in done and "failed" not in done
    assert [(c["type"], c["reason"]) for c in done["conditions"]] == [
        ("SuccessCriteriaMet", "CompletionsReached"),
        ("Complete", "CompletionsReached"),
    ]
    assert done["startTime"] == started
    assert done["completionTime"] == clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    with sim.api_client() as api_client:
        response = api_client.call_api(
            "GET",
            sim.base_url + "/apis/batch/v1/namespaces/default/jobs",
            header_params={
                "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io",
                "Authorization": f"Bearer {sim.token}",
            },
        )
        cells = json.loads(response.read())["rows"][0]["cells"]
    assert cells[:4] == ["train", "Complete", "3/3", "30s"]


def test_past_the_backoff_limit_the_job_fails_and_its_pods_go(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api
) -> None:
    batch.create_namespaced_job("default", job(completions=2, parallelism=2, backoffLimit=1))
    first, second = active(sim)
    write_status(sim, first, {"phase": "Failed"})
    assert status(sim)["failed"] == 1 and len(active(sim)) == 2  # replaced
    assert not status(sim).get("conditions")
    write_status(sim, second, {"phase": "Failed"})
    # 2 failed > backoffLimit 1: the running pod is deleted (and counted failed).
    assert active(sim) == []
    final = status(sim)
    assert final["failed"] == 3
    assert [(c["type"], c["reason"]) for c in final["conditions"]] == [
        ("FailureTarget", "BackoffLimitExceeded"),
        ("Failed", "BackoffLimitExceeded"),
    ]
    assert "completionTime" not in final


def test_a_work_queue_starts_no_pod_after_one_succeeded(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api
) -> None:
    batch.create_namespaced_job("default", job(parallelism=3))
    pods = active(sim)
    assert len(pods) == 3
    write_status(sim, pods[0], {"phase": "Succeeded"})
    assert len(active(sim)) == 2 and not status(sim).get("conditions")
    for pod in pods[1:]:
        write_status(sim, pod, {"phase": "Succeeded"})
    assert [c["type"] for c in status(sim)["conditions"]] == ["SuccessCriteriaMet", "Complete"]


def test_pods_past_parallelism_are_deleted(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api
) -> None:
    batch.create_namespaced_job("default", job(completions=4, parallelism=3))
    assert len(active(sim)) == 3
    batch.patch_namespaced_job("train", "default", {"spec": {"parallelism": 1}})
    assert len(active(sim)) == 1 and status(sim)["active"] == 1
