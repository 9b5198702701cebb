"""The virtual node end to end against the strict simulator: its status as a real API
server stores it (canonical quantities, so idle heartbeats write nothing), its addresses
and kubelet version; cordon and foreign taints stop binds and creates in offload mode;
`kubectl drain` (real kubectl, evictions) ends instances normally; DaemonSet pods are
never run and told why once."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.sandbox import Sandbox
from reconciler.sim.kube.controllers import ControllerSettings
from reconciler.sim.kube.resources import SERVER_VERSION
from tests.integration.conftest import FAST

NODE = "virtual-runpod"
MANAGED = {"runpod.io/managed": "true"}


def node_writes(box: Sandbox) -> list[tuple[str, str]]:
    return [
        (m, p)
        for m, p, *_ in box.kube_sim.requests
        if m != "GET" and p.startswith(f"/api/v1/nodes/{NODE}")
    ]


def core(box: Sandbox) -> client.CoreV1Api:
    return client.CoreV1Api(box.kube_sim.api_client())


def managed_unschedulable(box: Sandbox, name: str, **options: Any) -> None:
    box.add_pod(name, bound=False, annotations=dict(MANAGED), **options)
    box.kube_sim.make_unschedulable("default", name)


# --- point 4: the node's status ------------------------------------------------------------


@pytest.mark.parametrize("port", [10250, 0])
def test_three_idle_heartbeats_make_no_node_patch(box: Sandbox, port: int) -> None:
    box.configure(
        node_cpu="4000", node_memory="16Ti", kubelet_address="10.1.2.3", kubelet_port=port
    )
    box.heartbeat.beat()  # registers the node
    box.kube_sim.requests.clear()

    for _ in range(3):
        box.advance(10)
        box.heartbeat.beat()

    assert node_writes(box) == []
    node = core(box).read_node(NODE)
    assert node.status.capacity["cpu"] == "4k"


def test_the_node_shows_where_the_reconciler_listens_and_the_clusters_version(
    box: Sandbox,
) -> None:
    box.configure(kubelet_address="10.1.2.3", kubelet_port=10250)
    box.tick()

    node = core(box).read_node(NODE)

    assert [(a.type, a.address) for a in node.status.addresses] == [("InternalIP", "10.1.2.3")]
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 10250
    major, minor = SERVER_VERSION["major"], SERVER_VERSION["minor"]
    assert node.status.node_info.kubelet_version == f"v{major}.{minor}.0-runpod-reconciler"


# --- point 5: cordon and taints ------------------------------------------------------------


def test_cordon_stops_binding_and_creating(box: Sandbox) -> None:
    api = core(box)
    box.tick()  # the node is registered
    managed_unschedulable(box, "burst")
    box.add_pod("bound-waiting")
    api.patch_node(NODE, {"spec": {"unschedulable": True}})

    box.tick()
    box.tick()

    assert (box.pod("burst") or {})["spec"].get("nodeName") is None
    assert box.owned_instances() == []
    waiting = box.pod("bound-waiting") or {}
    state = waiting["status"]["containerStatuses"][0]["state"]["waiting"]
    assert state["reason"] == "NodeCordoned"
    assert [e["reason"] for e in box.events("bound-waiting")] == ["NodeCordoned"]

    api.patch_node(NODE, {"spec": {"unschedulable": False}})
    box.tick()
    box.tick()
    assert (box.pod("burst") or {})["spec"].get("nodeName") == NODE
    assert len(box.owned_instances()) == 2


def test_a_foreign_no_schedule_taint_stops_pods_that_do_not_tolerate_it(box: Sandbox) -> None:
    box.tick()
    core(box).patch_node(
        NODE,
        {
            "spec": {
                "taints": [
                    {
                        "key": "virtual-kubelet.io/provider",
                        "value": "runpod",
                        "effect": "NoSchedule",
                    },
                    {"key": "maintenance", "value": "true", "effect": "NoSchedule"},
                ]
            }
        },
    )
    managed_unschedulable(box, "plain")
    managed_unschedulable(
        box,
        "tolerant",
        extra_spec={
            "tolerations": [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]
        },
    )

    box.tick()
    box.tick()

    assert (box.pod("plain") or {})["spec"].get("nodeName") is None
    assert (box.pod("tolerant") or {})["spec"].get("nodeName") == NODE
    assert len(box.owned_instances()) == 1


def test_the_heartbeat_taints_of_a_late_node_do_not_stop_new_work(box: Sandbox) -> None:
    """Between two runs the node lifecycle controller may have tainted the node
    unreachable; the reconciler that reads that taint is the one back to lift it."""
    box.tick()
    core(box).patch_node(
        NODE,
        {
            "spec": {
                "taints": [
                    {
                        "key": "virtual-kubelet.io/provider",
                        "value": "runpod",
                        "effect": "NoSchedule",
                    },
                    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
                ]
            }
        },
    )
    managed_unschedulable(box, "burst")
    box.tick()
    box.tick()
    assert len(box.owned_instances()) == 1


@pytest.fixture
def tls_box() -> Iterator[Sandbox]:
    with Sandbox(FAST, tls=True) as sandbox:
        yield sandbox


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_drain_ends_instances_normally(tls_box: Sandbox) -> None:
    box = tls_box
    box.add_job("train")
    [pod] = box.job_pods("train")  # the Job controller's
    name = pod["metadata"]["name"]
    box.tick()
    instance = box.instance_for(box.pod(name) or {})
    assert instance is not None

    drain = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "drain", NODE, "--timeout=60s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(60):  # kubectl polls in real time; each round is one tick
            try:
                drain.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                box.tick()
                box.advance(5)
        out, err = drain.communicate(timeout=30)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 0, err
    assert f"evicting pod default/{name}" in out + err and "drained" in out
    assert box.pod(name) is None
    assert instance["id"] not in box.runpod_sim.instances  # terminated: billing stopped
    node = box.kube_sim.get("nodes", None, NODE) or {}
    assert node["spec"]["unschedulable"] is True


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_drain_ignoring_daemon_sets_leaves_their_pods_alone(tls_box: Sandbox) -> None:
    box = tls_box
    daemon_set = box.kube_sim.put(
        "daemonsets",
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "agent", "image": "agent:1"}]},
                },
            },
        },
    )
    box.kube_sim.create_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "agent-x",
                "namespace": "default",
                "labels": {"app": "agent"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": "agent",
                        "uid": daemon_set["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": NODE,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "agent", "image": "agent:1"}],
            },
        }
    )
    box.add_job("train")
    [pod] = box.job_pods("train")  # the Job controller's
    name = pod["metadata"]["name"]
    box.tick()

    drain = subprocess.run(
        ["kubectl", "--kubeconfig", box.kubeconfig, "drain", NODE, "--timeout=5s"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert drain.returncode != 0 and "DaemonSet-managed Pods" in drain.stderr

    drain = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            box.kubeconfig,
            "drain",
            NODE,
            "--ignore-daemonsets",
            "--timeout=1s",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"evicting pod default/{name}" in drain.stdout + drain.stderr
    box.tick()
    box.tick()
    assert box.pod(name) is None
    agent = box.pod("agent-x") or {}
    assert "deletionTimestamp" not in agent["metadata"]
    assert agent["status"]["reason"] == "DaemonSetPodNotRun"


# --- point 6: DaemonSet pods ----------------------------------------------------------------


def test_a_daemon_set_pod_is_never_run_and_told_why_once(box: Sandbox) -> None:
    box.ensure_namespace("monitoring")
    box.kube_sim.create_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "agent-x",
                "namespace": "monitoring",
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": "agent",
                        "uid": "ds-uid",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": NODE,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "agent", "image": "agent:1"}],
            },
        }
    )

    for _ in range(3):
        box.tick()
        box.advance(30)

    pod = box.pod("agent-x", "monitoring") or {}
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["reason"] == "DaemonSetPodNotRun"
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "DaemonSetPodNotRun")
    events = box.events("agent-x", "monitoring")
    assert [(e["reason"], e["count"]) for e in events] == [("DaemonSetPodNotRun", 1)]
    patches = [
        p for m, p, *_ in box.kube_sim.requests if m == "PATCH" and p.endswith("/agent-x/status")
    ]
    assert len(patches) == 1
    assert box.owned_instances() == []


def test_pods_marked_not_ready_while_the_reconciler_was_away_are_ready_again() -> None:
    """The node lifecycle controller sets every pod's Ready False when the heartbeat is
    late; the reconciler's next tick must set it back, though its instance is unchanged."""
    with Sandbox(FAST, controllers=ControllerSettings()) as box:
        box.add_pod("serve", ports=[8080])
        for _ in range(4):
            box.tick()
            box.advance(10)

        def ready() -> str:
            pod = box.pod("serve") or {}
            return next(c["status"] for c in pod["status"]["conditions"] if c["type"] == "Ready")

        assert ready() == "True"
        box.advance(90)  # no heartbeat: Ready=Unknown after 50 s, pods marked not ready
        assert ready() == "False"

        box.tick()
        assert ready() == "True"
        box.advance(10)
        requests = len(box.kube_sim.requests)
        box.tick()
        patches = [
            p
            for m, p, *_ in box.kube_sim.requests[requests:]
            if m == "PATCH" and p.endswith("/status")
        ]
        assert patches == []  # and no patch once it holds
