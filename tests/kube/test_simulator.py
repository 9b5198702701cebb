"""The Kubernetes API simulator's own semantics, exercised through the official client's
typed API over HTTP: resourceVersion conflicts, validation, the three patch formats,
selectors, paging, deletion with finalizers, generateName, watch, auth, faults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube.client import KubeClient
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.resources import PODS
from reconciler.sim.kube.simulator import KubeSimulator


def _pod(name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **metadata},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


@pytest.fixture
def core(sim: KubeSimulator) -> Iterator[client.CoreV1Api]:
    with sim.api_client() as api_client:
        yield client.CoreV1Api(api_client)


def _model(name: str, containers: int = 1, phase: str | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main", image="busybox") for _ in range(containers)]
        ),
        status=client.V1PodStatus(phase=phase) if phase else None,
    )


def _raw(response: Any) -> Any:
    return json.loads(response.data)


def _status(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body or "{}")
    return body


def test_update_with_a_stale_resource_version_is_409(core: client.CoreV1Api) -> None:
    created = _raw(core.create_namespaced_pod("default", _model("p"), _preload_content=False))
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "1"}}})
    created["metadata"]["labels"] = {"a": "2"}

    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_pod("p", "default", created)

    assert stale.value.status == 409
    assert _status(stale.value)["reason"] == "Conflict"


def test_create_ignores_status_and_validates(core: client.CoreV1Api, clock: SimClock) -> None:
    created = _raw(
        core.create_namespaced_pod("default", _model("p", phase="Running"), _preload_content=False)
    )
    assert created["status"]["phase"] == "Pending"
    assert created["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]

    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_pod("default", _model("x", containers=0))
    assert invalid.value.status == 422
    with pytest.raises(ApiException) as missing_ns:
        core.create_namespaced_pod("nowhere", _model("y"))
    assert missing_ns.value.status == 404
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_pod("default", _model("p"))
    assert exists.value.status == 409
    assert _status(exists.value)["reason"] == "AlreadyExists"


def test_generate_name_gets_a_unique_suffix(sim: KubeSimulator) -> None:
    names = {sim.create_pod(_pod("", generateName="job-"))["metadata"]["name"] for _ in range(20)}
    assert len(names) == 20 and all(n.startswith("job-") and len(n) == 9 for n in names)


def test_pod_spec_is_immutable_but_the_main_resource_cannot_touch_status(
    sim: KubeSimulator,
    core: client.CoreV1Api,
) -> None:
    sim.create_pod(_pod("p"))
    with pytest.raises(ApiException) as forbidden:
        core.patch_namespaced_pod(
            "p",
            "default",
            {"spec": {"nodeName": "sneaky"}},
            _content_type="application/merge-patch+json",
        )
    assert forbidden.value.status == 422

    core.patch_namespaced_pod(
        "p",
        "default",
        {"status": {"phase": "Running"}},
        _content_type="application/merge-patch+json",
    )
    pod = sim.get("pods", "default", "p")
    assert pod is not None and pod["status"]["phase"] == "Pending"


def test_json_patch_and_strategic_merge(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    sim.create_pod(_pod("p", labels={"a": "1"}, finalizers=["x/one"]))
    core.patch_namespaced_pod(
        "p",
        "default",
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "3"},
        ],
        _content_type="application/json-patch+json",
        _preload_content=False,
    )
    core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"finalizers": ["x/two"]}},
        _content_type="application/strategic-merge-patch+json",
        _preload_content=False,
    )

    pod = sim.get("pods", "default", "p")
    assert pod is not None
    assert pod["metadata"]["labels"] == {"a": "2", "b/c": "3"}
    assert pod["metadata"]["finalizers"] == ["x/one", "x/two"]
    with pytest.raises(ApiException) as failed:
        core.patch_namespaced_pod(
            "p",
            "default",
            [{"op": "test", "path": "/metadata/labels/a", "value": "9"}],
            _content_type="application/json-patch+json",
        )
    assert failed.value.status == 422


def test_field_and_label_selectors(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    for name, labels, node in (
        ("a", {"tier": "gpu", "team": "x"}, "n1"),
        ("b", {"tier": "cpu"}, "n1"),
        ("c", {"tier": "gpu"}, ""),
    ):
        body = _pod(name, labels=labels)
        body["spec"]["nodeName"] = node
        sim.create_pod(body)

    def names(field_selector: str | None = None, label_selector: str | None = None) -> list[str]:
        listed = _raw(
            core.list_pod_for_all_namespaces(
                field_selector=field_selector, label_selector=label_selector, _preload_content=False
            )
        )
        return [p["metadata"]["name"] for p in listed["items"]]

    assert names(field_selector="spec.nodeName=n1") == ["a", "b"]
    assert names(field_selector="spec.nodeName=,status.phase==Pending") == ["c"]
    assert names(field_selector="spec.nodeName!=n1") == ["c"]
    assert names(field_selector="metadata.name=b,metadata.namespace=default") == ["b"]
    assert names(label_selector="tier=gpu") == ["a", "c"]
    assert names(label_selector="tier in (gpu, cpu),team notin (y)") == ["a", "b", "c"]
    assert names(label_selector="team") == ["a"]
    assert names(label_selector="!team,tier!=cpu") == ["c"]
    with pytest.raises(ApiException) as bad:
        names(field_selector="spec.hostname=x")
    assert bad.value.status == 400


def test_field_selector_values_escape_commas_and_equals(
    sim: KubeSimulator, core: client.CoreV1Api, kube: KubeClient
) -> None:
    """As apimachinery's fields.ParseSelector: `\\,` `\\=` `\\\\` escape, anything else
    after a backslash and a bare `=` in a value are refused; a client that does not escape
    its value either fails or matches a second term it never meant."""
    sim.create_pod(_pod("talker"))

    def names(field_selector: str) -> list[str]:
        listed = _raw(
            core.list_pod_for_all_namespaces(field_selector=field_selector, _preload_content=False)
        )
        return [p["metadata"]["name"] for p in listed["items"]]

    assert names("metadata.name=talker,metadata.namespace=default") == ["talker"]
    assert names("metadata.name=talker\\,metadata.namespace\\=default") == []
    for bad in ("metadata.name=talker\\x", "metadata.name=a=b"):
        with pytest.raises(ApiException) as refused:
            names(bad)
        assert refused.value.status == 400
    # Our adapter escapes: a smuggled term is part of the name, which matches no pod.
    assert kube.pods.find("default", "talker,metadata.namespace=default") is None
    assert kube.pods.find("default", "talker") is not None


def test_paging_is_stable_when_pods_come_and_go(sim: KubeSimulator, core: client.CoreV1Api) -> None:
    for i in range(10):
        sim.create_pod(_pod(f"p{i}"))
    first = _raw(core.list_namespaced_pod("default", limit=4, _preload_content=False))
    sim.create_pod(_pod("p00"))  # sorts before the cursor: not in later pages
    sim.delete_pod("default", "p5")
    rest: list[str] = []
    token = first["metadata"]["continue"]
    while token:
        page = _raw(
            core.list_namespaced_pod("default", limit=4, _continue=token, _preload_content=False)
        )
        rest += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue")

    seen = [p["metadata"]["name"] for p in first["items"]] + rest
    assert seen == ["p0", "p1", "p2", "p3", "p4", "p6", "p7", "p8", "p9"]
    assert first["kind"] == "PodList" and first["metadata"]["resourceVersion"]


def test_finalizers_hold_a_deleted_object_until_removed(
    sim: KubeSimulator,
    core: client.CoreV1Api,
    clock: SimClock,
) -> None:
    sim.create_pod({**_pod("p", finalizers=["example.com/hold"])})
    core.delete_namespaced_pod("p", "default", _preload_content=False)
    pod = sim.get("pods", "default", "p")
    assert pod is not None and pod["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"

    core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
        _preload_content=False,
    )
    assert sim.get("pods", "default", "p") is None


def test_an_object_being_deleted_gains_no_finalizer(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    """A controller that only adds its finalizer after the delete is refused (422), as
    the API server does: the hold must come before."""
    sim.create_pod({**_pod("p", finalizers=["example.com/hold"])})
    core.delete_namespaced_pod("p", "default", _preload_content=False)
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_pod(
            "p",
            "default",
            {"metadata": {"finalizers": ["example.com/hold", "example.com/late"]}},
            _content_type="application/merge-patch+json",
        )
    assert refused.value.status == 422
    assert "no new finalizers can be added" in refused.value.body
    pod = sim.get("pods", "default", "p")
    assert pod is not None and pod["metadata"]["finalizers"] == ["example.com/hold"]


def test_delete_precondition_on_resource_version(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    sim.create_pod(_pod("p"))
    with pytest.raises(ApiException) as failed:
        core.delete_namespaced_pod(
            "p",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1")),
        )
    assert failed.value.status == 409
    assert sim.get("pods", "default", "p") is not None


def test_watch_streams_changes_from_a_resource_version(
    sim: KubeSimulator,
    core: client.CoreV1Api,
) -> None:
    sim.create_pod(_pod("before"))
    listed = _raw(core.list_namespaced_pod("default", _preload_content=False))
    sim.create_pod(_pod("p", labels={"w": "1"}))
    sim.store.patch(
        PODS, "default", "p", "application/merge-patch+json", {"metadata": {"labels": {"w": "2"}}}
    )
    sim.delete_pod("default", "p")

    stream = watch.Watch().stream(
        core.list_namespaced_pod,
        "default",
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=1,
    )
    seen = [(e["type"], e["raw_object"]["metadata"]["name"]) for e in _take(stream, 3)]

    assert seen == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


def test_watch_with_a_selector_sees_objects_leave_it(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    sim.create_pod(_pod("p", labels={"w": "1"}))
    rv = str(sim.store.resource_version)
    sim.store.patch(
        PODS, "default", "p", "application/merge-patch+json", {"metadata": {"labels": {"w": "2"}}}
    )

    stream = watch.Watch().stream(
        core.list_namespaced_pod,
        "default",
        label_selector="w=1",
        resource_version=rv,
        timeout_seconds=1,
    )
    (event,) = _take(stream, 1)

    assert event["type"] == "DELETED"


def test_requests_need_the_bearer_token(sim: KubeSimulator) -> None:
    configuration = client.Configuration(host=sim.base_url)
    with client.ApiClient(configuration) as anonymous, pytest.raises(ApiException) as denied:
        client.CoreV1Api(anonymous).list_namespace()
    assert denied.value.status == 401
    assert ("GET", "/api/v1/namespaces", "", 401) in sim.requests


def test_injected_faults_hit_the_next_matching_requests(
    sim: KubeSimulator, core: client.CoreV1Api
) -> None:
    sim.inject_fault("GET", "/api/v1/namespaces/*", 503, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as failed:
            core.read_namespace("default")
        assert failed.value.status == 503
    namespace = core.read_namespace("default")
    assert namespace.metadata is not None and namespace.metadata.name == "default"


def test_discovery_lists_resources_and_subresources(
    core: client.CoreV1Api, sim: KubeSimulator
) -> None:
    resources = core.get_api_resources()
    names = {r.name for r in resources.resources}
    assert {
        "pods",
        "pods/status",
        "pods/binding",
        "nodes",
        "nodes/status",
        "events",
        "secrets",
        "configmaps",
        "namespaces",
    } <= names
    with sim.api_client() as api_client:
        groups = client.ApisApi(api_client).get_api_versions()
    assert {g.name for g in groups.groups} >= {"batch", "coordination.k8s.io"}


def _take(stream: Iterator[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    events = []
    for event in stream:
        events.append(event)
        if len(events) == count:
            break
    return events
