"""The Kubernetes simulator's Services and EndpointSlices, as the API server and the
EndpointSlice controller behave, through the official client over HTTP: a Service's
defaults (ClusterIP allocated from the service range, type, port protocol and
targetPort), its validation (its name an RFC 1123 label without dots, ports required,
named when several, in range, unique), its ClusterIP fixed once set and kept by an
update that leaves it out; the `kubernetes` Service; EndpointSlice validation (address
type, no loopback or link-local endpoint, an address type that never changes); and the
controller's slices (`kubernetes.io/service-name`, its own `managed-by`, ready from the
pod's Ready condition, no endpoint for a pod without an IP, others' slices left
alone). tests/realk8s/test_service_rules.py checks the same rules on the real server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sim.kube.simulator import KubeSimulator

SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


@pytest.fixture
def api(sim: KubeSimulator) -> Iterator[client.ApiClient]:
    with sim.api_client() as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def discovery(api: client.ApiClient) -> client.DiscoveryV1Api:
    return client.DiscoveryV1Api(api)


def service(core: client.CoreV1Api, name: str = "web", **spec: Any) -> dict[str, Any]:
    body = {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}
    made = core.create_namespaced_service("default", body)
    return dict(core.api_client.sanitize_for_serialization(made))


def invalid(call: Any) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422, caught.value.body
    return str(caught.value.body)


def test_defaults_and_an_allocated_cluster_ip(core):
    made = service(core)
    spec = made["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert spec["clusterIP"].startswith("10.") and spec["clusterIPs"] == [spec["clusterIP"]]
    other = service(core, "api")
    assert other["spec"]["clusterIP"] != spec["clusterIP"]
    kubernetes = core.read_namespaced_service("kubernetes", "default")
    assert kubernetes.spec.cluster_ip == "10.96.0.1"
    assert kubernetes.spec.ports[0].port == 443


def test_a_cluster_ip_asked_for_must_be_in_the_range_and_free(core):
    outside = invalid(lambda: service(core, clusterIP="192.168.0.9"))
    assert "does not match the current range" in outside
    taken = service(core)["spec"]["clusterIP"]
    assert "already allocated" in invalid(lambda: service(core, "b", clusterIP=taken))
    assert service(core, "headless", clusterIP="None")["spec"]["clusterIP"] == "None"


def test_validation(core):
    assert "must not contain dots" in invalid(lambda: service(core, "web.default"))
    assert "RFC 1123 label" in invalid(lambda: service(core, "-web"))
    assert service(core, "1web")["metadata"]["name"] == "1web"  # RelaxedServiceNameValidation
    assert "spec.ports: Required value" in invalid(lambda: service(core, ports=[]))
    two = [{"port": 80}, {"port": 81}]
    assert "spec.ports[0].name: Required value" in invalid(lambda: service(core, ports=two))
    dup = [{"name": "a", "port": 80}, {"name": "a", "port": 81}]
    assert "Duplicate value" in invalid(lambda: service(core, ports=dup))
    same = [{"name": "a", "port": 80}, {"name": "b", "port": 80}]
    assert "spec.ports[1]: Duplicate value" in invalid(lambda: service(core, ports=same))
    assert "between 1 and 65535" in invalid(lambda: service(core, ports=[{"port": 70000}]))
    assert "Unsupported value" in invalid(
        lambda: service(core, ports=[{"port": 80, "protocol": "HTTP"}])
    )
    named = service(core, "named", ports=[{"port": 80, "targetPort": "http"}])
    assert named["spec"]["ports"][0]["targetPort"] == "http"


def test_the_cluster_ip_never_changes_and_an_update_without_it_keeps_it(core):
    made = core.read_namespaced_service("web", "default") if False else None
    made = service(core)
    ip = made["spec"]["clusterIP"]
    replaced = {
        "metadata": {"name": "web", "resourceVersion": made["metadata"]["resourceVersion"]},
        "spec": {"ports": [{"port": 8080}], "selector": {"app": "web"}},
    }
    kept = core.replace_namespaced_service("web", "default", replaced)
    assert kept.spec.cluster_ip == ip and kept.spec.ports[0].port == 8080
    changed = {
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}], "clusterIP": "10.96.0.99"},
    }
    assert "may not change once set" in invalid(
        lambda: core.replace_namespaced_service("web", "default", changed)
    )


def _slice(name: str, address: str, **fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {SERVICE_NAME: "backend", MANAGED_BY: "someone"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address]}],
        "ports": [{"name": "http", "port": 8080}],
        **fields,
    }


def test_endpoint_slice_validation(discovery):
    made = discovery.create_namespaced_endpoint_slice("default", _slice("ok", "10.1.2.3"))
    assert made.ports[0].protocol == "TCP"
    for address, why in (
        ("127.0.0.1", "loopback"),
        ("169.254.1.1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("fe80::1", "valid IPv4"),
    ):
        body = _slice("bad", address)
        assert why in invalid(
            lambda b=body: discovery.create_namespaced_endpoint_slice("default", b)
        )
    assert "Required value" in invalid(
        lambda: discovery.create_namespaced_endpoint_slice(
            "default", _slice("bad", "10.1.2.3", endpoints=[{"addresses": []}])
        )
    )
    body = discovery.api_client.sanitize_for_serialization(made)
    body["addressType"] = "IPv6"
    body["endpoints"] = [{"addresses": ["fd00::1"]}]
    assert "field is immutable" in invalid(
        lambda: discovery.replace_namespaced_endpoint_slice("ok", "default", body)
    )


def _controller_slices(sim: KubeSimulator, service_name: str) -> list[dict[str, Any]]:
    return [
        piece
        for piece in sim.list("endpointslices", "default")
        if piece["metadata"]["labels"].get(SERVICE_NAME) == service_name
        and piece["metadata"]["labels"].get(MANAGED_BY) == "endpointslice-controller.k8s.io"
    ]


def _pod(sim: KubeSimulator, name: str, ip: str | None, ready: bool) -> None:
    sim.put("nodes", {"metadata": {"name": "n1"}})
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if ip:
        status.update(podIP=ip, podIPs=[{"ip": ip}])
    sim.put(
        "pods",
        {
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "nodeName": "n1",
                "containers": [
                    {"name": "c", "image": "x", "ports": [{"name": "http", "containerPort": 8080}]}
                ],
            },
            "status": status,
        },
    )


def test_the_controller_publishes_pods_with_an_ip_and_skips_those_without(sim, core, discovery):
    service(core, selector={"app": "web"}, ports=[{"port": 80, "targetPort": "http"}])
    _pod(sim, "ready", "10.244.0.5", True)
    _pod(sim, "starting", "10.244.0.6", False)
    _pod(sim, "no-ip", None, True)
    (piece,) = _controller_slices(sim, "web")
    endpoints = {e["targetRef"]["name"]: e for e in piece["endpoints"]}
    assert set(endpoints) == {"ready", "starting"}  # a pod without an IP gets no endpoint
    assert endpoints["ready"]["conditions"]["ready"] is True
    assert endpoints["starting"]["conditions"]["ready"] is False
    assert piece["ports"] == [{"name": "", "port": 8080, "protocol": "TCP"}]
    ours = discovery.create_namespaced_endpoint_slice(
        "default",
        {
            **_slice("ours", "10.9.9.9"),
            "metadata": {
                "name": "ours",
                "labels": {SERVICE_NAME: "web", MANAGED_BY: "runpod.io/reconciler"},
            },
        },
    )
    _pod(sim, "ready", "10.244.0.7", True)
    assert sim.get("endpointslices", "default", "ours")["endpoints"] == [
        {"addresses": ["10.9.9.9"]}
    ]
    assert ours.metadata.name == "ours"
    core.delete_namespaced_service("web", "default")
    assert _controller_slices(sim, "web") == []
    assert sim.get("endpointslices", "default", "ours") is not None
