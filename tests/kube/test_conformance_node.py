"""Conformance of the Kubernetes simulator for nodes, one test per rule it enforces, each
one a sloppy client (or a sloppy simulator) would fail. Through the official client over
HTTP, time driven by the simulator's clock.

Rules:
- quantities are stored canonically (node capacity/allocatable, container resources);
  daemonEndpoints is always serialised (a Go struct, not a pointer);
  an unparseable one is a 400; negative capacity and fractional extended resources 422;
- taints: known effect, unique by key and effect; addresses unique; providerID set once;
- DefaultTolerationSeconds admission: 300 s not-ready/unreachable tolerations on create;
- pods/eviction (policy/v1), advertised in discovery as kubectl drain looks for it;
  DaemonSets stored (apps/v1), which `kubectl drain --ignore-daemonsets` reads;
- the API server reaches a kubelet by address type, Hostname first;
- node lifecycle controller: Ready=Unknown after the grace period without a Lease
  renewal, the unreachable taints, pods' Ready False, eviction after tolerationSeconds
  (never without a limit, at once without a toleration), cordon's unschedulable taint;
- cloud node lifecycle controller (switchable) deletes a NotReady node the cloud lacks;
- pod garbage collection deletes the pods of a node missing for the 40 s quarantine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sim.clock import SimClock
from reconciler.sim.kube.controllers import ControllerSettings
from reconciler.sim.kube.nodes import preferred_address
from reconciler.sim.kube.resources import PODS
from reconciler.sim.kube.simulator import KubeSimulator

NODE = "virtual-runpod"


@pytest.fixture
def core(sim: KubeSimulator) -> Iterator[client.CoreV1Api]:
    with sim.api_client() as api_client:
        yield client.CoreV1Api(api_client)


@pytest.fixture
def cluster(clock: SimClock) -> Iterator[KubeSimulator]:
    """A simulator whose controller manager runs (cloud node lifecycle off)."""
    with KubeSimulator(clock=clock, controllers=ControllerSettings()) as simulator:
        yield simulator


@pytest.fixture
def cluster_core(cluster: KubeSimulator) -> Iterator[client.CoreV1Api]:
    with cluster.api_client() as api_client:
        yield client.CoreV1Api(api_client)


def _node(name: str = NODE, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {},
        "status": {"capacity": {"cpu": "4"}, **status},
    }


def _ready_node(clock: SimClock, name: str = NODE) -> dict[str, Any]:
    stamp = clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return _node(
        name,
        conditions=[
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
        ],
    )


def _pod(name: str, node: str = NODE, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}], **spec},
    }


def _error(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body or "{}")


def _renew_lease(sim: KubeSimulator, clock: SimClock, name: str = NODE) -> None:
    stamp = clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    sim.put(
        "leases",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": stamp},
        },
    )


def _ready(sim: KubeSimulator) -> str:
    node = sim.get("nodes", None, NODE) or {}
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")


def _taints(sim: KubeSimulator) -> set[tuple[str, str]]:
    node = sim.get("nodes", None, NODE) or {}
    return {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []}


# quantities -------------------------------------------------------------------------


def test_node_quantities_are_stored_canonically(core: client.CoreV1Api) -> None:
    core.create_node(
        _node(
            capacity={"cpu": "4000", "memory": "16384Gi", "pods": "110", "nvidia.com/gpu": "1000"},
            allocatable={"cpu": "0.5", "memory": "1536Mi"},
        )
    )

    node = core.read_node(NODE)

    assert node.status.capacity == {
        "cpu": "4k",
        "memory": "16Ti",
        "pods": "110",
        "nvidia.com/gpu": "1k",
    }
    assert node.status.allocatable == {"cpu": "500m", "memory": "1536Mi"}


def test_daemon_endpoints_are_always_serialised(core: client.CoreV1Api, sim: KubeSimulator) -> None:
    core.create_node(_node())
    stored = sim.get("nodes", None, NODE) or {}
    assert stored["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}


def test_container_resources_are_stored_canonically(core: client.CoreV1Api) -> None:
    pod = _pod("p")
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1000m", "memory": "2048Mi"},
        "limits": {"nvidia.com/gpu": "1"},
    }

    created = core.create_namespaced_pod("default", pod)

    assert created.spec.containers[0].resources.requests == {"cpu": "1", "memory": "2Gi"}


def test_an_unparseable_quantity_is_a_bad_request(core: client.CoreV1Api) -> None:
    status, body = _error(lambda: core.create_node(_node(capacity={"cpu": "four"})))
    assert status == 400 and "quantities must match" in body["message"]


@pytest.mark.parametrize(
    ("capacity", "problem"),
    [
        ({"cpu": "-1"}, "must be greater than or equal to 0"),
        ({"nvidia.com/gpu": "1.5"}, "must be an integer"),
    ],
)
def test_capacity_must_be_non_negative_and_extended_resources_whole(
    core: client.CoreV1Api,
    capacity: dict[str, str],
    problem: str,
) -> None:
    status, body = _error(lambda: core.create_node(_node(capacity=capacity)))
    assert status == 422 and problem in body["message"]


# taints, addresses, providerID ---------------------------------------------------------


@pytest.mark.parametrize(
    ("taints", "problem"),
    [
        ([{"key": "a", "effect": "NoRun"}], "Unsupported value"),
        (
            [
                {"key": "a", "effect": "NoSchedule"},
                {"key": "a", "value": "x", "effect": "NoSchedule"},
            ],
            "unique by key and effect",
        ),
    ],
)
def test_taints_are_validated(
    core: client.CoreV1Api, taints: list[dict[str, str]], problem: str
) -> None:
    node = _node()
    node["spec"]["taints"] = taints
    status, body = _error(lambda: core.create_node(node))
    assert status == 422 and problem in body["message"]


def test_node_addresses_must_be_unique(core: client.CoreV1Api) -> None:
    core.create_node(_node())
    address = {"type": "InternalIP", "address": "10.0.0.9"}
    node = core.read_node(NODE)
    node.status.addresses = [address, dict(address)]
    # A PUT: a strategic merge patch would fold the two by their merge key (type).
    status, body = _error(lambda: core.replace_node_status(NODE, node))
    assert status == 422 and "status.addresses[1]" in body["message"]


def test_provider_id_is_set_once(core: client.CoreV1Api) -> None:
    core.create_node(_node())
    core.patch_node(NODE, {"spec": {"providerID": "runpod://one"}})
    status, _ = _error(lambda: core.patch_node(NODE, {"spec": {"providerID": "runpod://two"}}))
    assert status == 422


def test_the_api_server_reaches_a_kubelet_at_a_hostname_before_an_internal_ip() -> None:
    node = _node(
        addresses=[
            {"type": "InternalIP", "address": "10.0.0.9"},
            {"type": "Hostname", "address": NODE},
        ]
    )
    assert preferred_address(node) == NODE
    assert (
        preferred_address(_node(addresses=[{"type": "InternalIP", "address": "10.0.0.9"}]))
        == "10.0.0.9"
    )


# admission and eviction ------------------------------------------------------------


def test_default_toleration_seconds_are_added_on_create(core: client.CoreV1Api) -> None:
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}

    plain = core.create_namespaced_pod("default", _pod("plain"))
    patient = core.create_namespaced_pod("default", _pod("patient", tolerations=[own]))

    assert {(t.key, t.toleration_seconds) for t in plain.spec.tolerations} == {
        ("node.kubernetes.io/not-ready", 300),
        ("node.kubernetes.io/unreachable", 300),
    }
    assert {(t.key, t.toleration_seconds) for t in patient.spec.tolerations} == {
        ("node.kubernetes.io/not-ready", 300),
        ("node.kubernetes.io/unreachable", None),
    }


def test_eviction_is_advertised_for_kubectl_drain(core: client.CoreV1Api) -> None:
    resources = {r.name: r for r in core.get_api_resources().resources}
    eviction = resources["pods/eviction"]
    assert (eviction.group, eviction.version, eviction.kind) == ("policy", "v1", "Eviction")
    assert eviction.verbs == ["create"]


def test_an_eviction_marks_the_pod_and_deletes_it_gracefully(
    core: client.CoreV1Api,
    sim: KubeSimulator,
) -> None:
    core.create_namespaced_pod("default", _pod("p"))
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="p", namespace="default"))

    core.create_namespaced_pod_eviction("p", "default", body)

    pod = sim.get("pods", "default", "p")
    assert pod is not None and pod["metadata"]["deletionGracePeriodSeconds"] == 30
    target = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert target["reason"] == "EvictionByEvictionAPI"


def test_an_eviction_must_name_its_pod(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", _pod("p"))
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="other"))
    status, _ = _error(lambda: core.create_namespaced_pod_eviction("p", "default", body))
    assert status == 400


# the node lifecycle controller ----------------------------------------------------------


def test_a_node_whose_lease_stops_goes_unknown_after_the_grace_period(
    cluster: KubeSimulator,
    clock: SimClock,
) -> None:
    cluster.put("nodes", _ready_node(clock))
    _renew_lease(cluster, clock)
    cluster.create_pod(_pod("p"))
    cluster.store.patch(
        PODS,
        "default",
        "p",
        "application/strategic-merge-patch+json",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        "status",
    )

    clock.advance(45)
    assert _ready(cluster) == "True"
    clock.advance(15)  # the grace period counts from the controller's first look (5 s)

    assert _ready(cluster) == "Unknown"
    assert _taints(cluster) == {
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
    }
    pod = cluster.get("pods", "default", "p") or {}
    assert next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"


def test_lease_renewals_keep_a_node_ready(cluster: KubeSimulator, clock: SimClock) -> None:
    cluster.put("nodes", _ready_node(clock))
    for _ in range(30):
        _renew_lease(cluster, clock)
        clock.advance(10)
    assert _ready(cluster) == "True" and _taints(cluster) == set()


def test_pods_are_evicted_when_their_toleration_runs_out(
    cluster: KubeSimulator,
    clock: SimClock,
) -> None:
    cluster.put("nodes", _ready_node(clock))
    _renew_lease(cluster, clock)
    cluster.create_pod(_pod("default-tolerations"))
    cluster.create_pod(
        _pod(
            "forever",
            tolerations=[
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                }
            ],
        )
    )

    clock.advance(55 + 295)
    assert (
        "deletionTimestamp"
        not in (cluster.get("pods", "default", "default-tolerations") or {})["metadata"]
    )
    clock.advance(10)

    evicted = cluster.get("pods", "default", "default-tolerations") or {}
    assert "deletionTimestamp" in evicted["metadata"]
    assert any(c.get("reason") == "DeletionByTaintManager" for c in evicted["status"]["conditions"])
    assert "deletionTimestamp" not in (cluster.get("pods", "default", "forever") or {})["metadata"]


def test_a_pod_that_does_not_tolerate_a_no_execute_taint_is_evicted_at_once(
    cluster: KubeSimulator,
    clock: SimClock,
    cluster_core: client.CoreV1Api,
) -> None:
    core = cluster_core
    cluster.put("nodes", _ready_node(clock))
    cluster.create_pod(_pod("p"))
    _renew_lease(cluster, clock)
    core.patch_node(NODE, {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})

    clock.advance(5)

    assert "deletionTimestamp" in (cluster.get("pods", "default", "p") or {})["metadata"]


def test_cordon_adds_the_unschedulable_taint(
    cluster: KubeSimulator, clock: SimClock, cluster_core: client.CoreV1Api
) -> None:
    core = cluster_core
    cluster.put("nodes", _ready_node(clock))
    _renew_lease(cluster, clock)
    core.patch_node(NODE, {"spec": {"unschedulable": True}})
    clock.advance(5)
    assert _taints(cluster) == {("node.kubernetes.io/unschedulable", "NoSchedule")}

    core.patch_node(NODE, {"spec": {"unschedulable": False}})
    _renew_lease(cluster, clock)
    clock.advance(5)
    assert _taints(cluster) == set()


# cloud node lifecycle and pod GC -----------------------------------------------------------


@pytest.mark.parametrize("cloud", [True, False])
def test_the_cloud_node_controller_deletes_a_not_ready_node_it_does_not_know(
    clock: SimClock,
    cloud: bool,
) -> None:
    settings = ControllerSettings(cloud_node_lifecycle=cloud, cloud_nodes={"real-node"})
    with KubeSimulator(clock=clock, controllers=settings) as sim:
        sim.put("nodes", _ready_node(clock))
        sim.put("nodes", _ready_node(clock, "real-node"))

        clock.advance(60)

        assert (sim.get("nodes", None, NODE) is None) is cloud
        assert sim.get("nodes", None, "real-node") is not None


def test_pod_gc_deletes_the_pods_of_a_node_missing_past_the_quarantine(
    cluster: KubeSimulator,
    clock: SimClock,
) -> None:
    cluster.create_pod(_pod("p", node="gone-node"))
    clock.advance(20)  # first seen orphaned
    assert cluster.get("pods", "default", "p") is not None

    clock.advance(40)

    assert cluster.get("pods", "default", "p") is None


def test_pod_gc_spares_the_pods_of_a_node_registered_again_in_time(
    cluster: KubeSimulator,
    clock: SimClock,
) -> None:
    cluster.create_pod(_pod("p"))
    clock.advance(20)
    cluster.put("nodes", _ready_node(clock))
    _renew_lease(cluster, clock)
    clock.advance(45)
    assert cluster.get("pods", "default", "p") is not None


def test_timers_run_at_their_own_moment(clock: SimClock) -> None:
    seen = []
    clock.every(5, lambda: seen.append(clock.now()))
    start = clock.now()
    clock.advance(12)
    assert seen == [start + timedelta(seconds=5), start + timedelta(seconds=10)]
    assert clock.now() == start + timedelta(seconds=12)
