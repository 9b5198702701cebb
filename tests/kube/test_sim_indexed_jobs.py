"""The Kubernetes simulator's Job controller for Indexed Jobs, held to the real controller
(pkg/controller/job: manageJob, indexed_job_utils.go): one pod per index up to
parallelism, with the completion index as annotation and label, hostname
`<job>-<index>`, generateName `<job>-<index>-` (cut to fit), JOB_COMPLETION_INDEX from
the annotation, a controller reference; a failed index made again; completions counted
per index; the API's rule that an Indexed Job names its completions; and a cascading
delete taking the pods with the Job. All through the official client."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from reconciler.sim.kube.resources import PODS
from reconciler.sim.kube.simulator import KubeSimulator

INDEX = "batch.kubernetes.io/job-completion-index"


def indexed_job(name: str = "train", completions: int = 3, **spec: Any) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "train"}, "annotations": {"runpod.io/cluster": "true"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "busybox:1.36", "env": [{"name": "A", "value": "1"}]}
            ],
        },
    }
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": completions,
            "template": template,
            **spec,
        },
    }
    return body


@pytest.fixture
def batch(sim: KubeSimulator) -> kubernetes.client.BatchV1Api:
    return kubernetes.client.BatchV1Api(sim.api_client())


@pytest.fixture
def core(sim: KubeSimulator) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(sim.api_client())


def pods_by_index(core: kubernetes.client.CoreV1Api, active_only: bool = True) -> dict[int, Any]:
    pods = core.list_namespaced_pod("default").items
    return {
        int(pod.metadata.annotations[INDEX]): pod
        for pod in pods
        if not active_only
        or (pod.status.phase not in ("Succeeded", "Failed") and not pod.metadata.deletion_timestamp)
    }


def finish(sim: KubeSimulator, pod: Any, phase: str) -> None:
    status = {"phase": phase, "conditions": []}
    """The pod's kubelet writes a terminal phase (here, straight into the store)."""
    sim.store.patch(
        PODS,
        "default",
        pod.metadata.name,
        "application/merge-patch+json",
        {"status": status},
        "status",
    )


def test_an_indexed_job_gets_one_pod_per_index(
    batch: kubernetes.client.BatchV1Api, core: kubernetes.client.CoreV1Api
) -> None:
    job = batch.create_namespaced_job("default", indexed_job())
    pods = pods_by_index(core)
    assert sorted(pods) == [0, 1, 2]
    for index, pod in pods.items():
        assert pod.metadata.annotations[INDEX] == str(index)
        assert pod.metadata.labels[INDEX] == str(index)
        assert pod.metadata.labels["app"] == "train"
        assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "train"
        assert pod.metadata.annotations["runpod.io/cluster"] == "true"
        assert pod.metadata.name.startswith(f"train-{index}-")
        assert len(pod.metadata.name) == len(f"train-{index}-") + 5
        assert pod.spec.hostname == f"train-{index}"
        owner = pod.metadata.owner_references[0]
        assert (owner.kind, owner.uid, owner.controller) == ("Job", job.metadata.uid, True)
        env = {var.name: var for var in pod.spec.containers[0].env}
        assert env["A"].value == "1"
        path = env["JOB_COMPLETION_INDEX"].value_from.field_ref.field_path
        # As the real Job controller of 1.37 writes it (seen on tests/realk8s' plane).
        assert path == f"metadata.labels['{INDEX}']"
        assert "batch.kubernetes.io/job-tracking" in pod.metadata.finalizers


def test_parallelism_bounds_the_active_pods(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api, core: kubernetes.client.CoreV1Api
) -> None:
    batch.create_namespaced_job("default", indexed_job(completions=3, parallelism=2))
    assert sorted(pods_by_index(core)) == [0, 1]
    finish(sim, pods_by_index(core)[0], "Succeeded")
    assert sorted(pods_by_index(core)) == [1, 2]


def test_a_long_name_is_cut_to_leave_room_for_the_index_and_suffix(
    batch: kubernetes.client.BatchV1Api, core: kubernetes.client.CoreV1Api
) -> None:
    name = "j" * 60
    batch.create_namespaced_job("default", indexed_job(name=name, completions=2))
    for index, pod in pods_by_index(core).items():
        prefix = "j" * (58 - len(f"-{index}-")) + f"-{index}-"
        assert pod.metadata.name.startswith(prefix) and len(pod.metadata.name) == 63
        assert pod.spec.hostname == f"{name}-{index}"


def test_completions_are_counted_per_index(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api, core: kubernetes.client.CoreV1Api
) -> None:
    batch.create_namespaced_job("default", indexed_job(completions=3))
    pods = pods_by_index(core)
    finish(sim, pods[2], "Succeeded")
    finish(sim, pods[0], "Succeeded")
    status = batch.read_namespaced_job("train", "default").status
    assert (status.succeeded, status.completed_indexes) == (2, "0,2")
    assert not status.conditions
    finish(sim, pods[1], "Succeeded")
    status = batch.read_namespaced_job("train", "default").status
    assert (status.succeeded, status.completed_indexes) == (3, "0-2")
    assert [c.type for c in status.conditions] == ["SuccessCriteriaMet", "Complete"]
    assert pods_by_index(core) == {}


def test_a_failed_index_is_made_again_until_the_job_fails(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api, core: kubernetes.client.CoreV1Api
) -> None:
    batch.create_namespaced_job("default", indexed_job(completions=2, backoffLimit=1))
    first = pods_by_index(core)[1]
    finish(sim, first, "Failed")
    again = pods_by_index(core)[1]
    assert again.metadata.name != first.metadata.name and again.spec.hostname == "train-1"
    assert batch.read_namespaced_job("train", "default").status.failed == 1
    finish(sim, again, "Failed")
    status = batch.read_namespaced_job("train", "default").status
    assert [c.type for c in status.conditions] == ["FailureTarget", "Failed"]
    assert pods_by_index(core) == {}  # the failed Job's active pod was deleted


def test_an_indexed_job_must_name_its_completions(batch: kubernetes.client.BatchV1Api) -> None:
    body = indexed_job()
    del body["spec"]["completions"]
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_job("default", body)
    assert refused.value.status == 422 and "spec.completions" in refused.value.body
    body = indexed_job()
    body["spec"]["completionMode"] = "Ordered"
    with pytest.raises(ApiException):
        batch.create_namespaced_job("default", body)


@pytest.mark.parametrize(("policy", "pods_left"), [("Background", 0), (None, 2)])
def test_a_cascading_delete_takes_the_pods(
    batch: kubernetes.client.BatchV1Api,
    core: kubernetes.client.CoreV1Api,
    policy: str | None,
    pods_left: int,
) -> None:
    batch.create_namespaced_job("default", indexed_job(completions=2))
    body = kubernetes.client.V1DeleteOptions(propagation_policy=policy)
    batch.delete_namespaced_job("train", "default", body=body)
    assert len(pods_by_index(core)) == pods_left


def test_an_index_that_succeeds_twice_counts_once(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api, core: kubernetes.client.CoreV1Api
) -> None:
    job = batch.create_namespaced_job("default", indexed_job(completions=2))
    first = pods_by_index(core)[0]
    twin = core.create_namespaced_pod(
        "default",
        {
            "metadata": {
                "name": "train-0-twin",
                "annotations": {INDEX: "0"},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": "train",
                        "uid": job.metadata.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
        },
    )
    finish(sim, first, "Succeeded")
    finish(sim, twin, "Succeeded")
    status = batch.read_namespaced_job("train", "default").status
    assert (status.succeeded, status.completed_indexes) == (1, "0")


def test_a_billion_completions_make_parallelism_pods_at_once(
    sim: KubeSimulator, batch: kubernetes.client.BatchV1Api, core: kubernetes.client.CoreV1Api
) -> None:
    """As the real API and controller: completions is an int32, made lazily."""
    batch.create_namespaced_job("default", indexed_job(completions=1_000_000_000, parallelism=2))
    assert sorted(pods_by_index(core)) == [0, 1]
    finish(sim, pods_by_index(core)[0], "Succeeded")
    assert sorted(pods_by_index(core)) == [1, 2]


@pytest.mark.parametrize(
    "spec", [{"completions": -1}, {"parallelism": -1}, {"parallelism": 100_001}]
)
def test_counts_the_api_validation_refuses(
    batch: kubernetes.client.BatchV1Api, spec: dict[str, Any]
) -> None:
    body = indexed_job()
    body["spec"].update(spec)
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_job("default", body)
    assert refused.value.status == 422 and f"spec.{next(iter(spec))}" in refused.value.body


def test_a_count_past_int32_fails_decoding(batch: kubernetes.client.BatchV1Api) -> None:
    body = indexed_job()
    body["spec"]["completions"] = 2**31
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_job("default", body)
    assert refused.value.status == 400 and "int32" in refused.value.body
