"""The virtual node among the real node lifecycle controller and the eviction API: a
reconciler that dies lets its node's Lease lapse and the node be tainted unreachable,
its restart brings the node back; `kubectl drain` evicts a pod, which ends its instance
before the pod goes, as a kubelet finishes a pod."""

from __future__ import annotations

from typing import Any

from tests.realk8s.test_pods import gpu_pod
from tests.realk8s.world import NODE, World

UNREACHABLE = "node.kubernetes.io/unreachable"


def taints(world: World) -> list[str]:
    node: dict[str, Any] = world.plane_get_node()
    return [t["key"] for t in node["spec"].get("taints") or []]


def test_a_dead_reconcilers_node_is_tainted_and_its_restart_brings_it_back(world: World) -> None:
    world.kill()
    world.wait_for("the unreachable taint", lambda: UNREACHABLE in taints(world), timeout=60)
    world.restart()
    world.wait_for("the node to be Ready", world.node_ready, timeout=60)
    world.wait_for("the taint to go", lambda: UNREACHABLE not in taints(world), timeout=60)


def test_kubectl_drain_evicts_a_pod_and_its_instance_ends_first(world: World) -> None:
    world.apply(gpu_pod("evicted"))
    pod = world.wait_for(
        "the pod to run",
        lambda: (p := world.get("pod", "evicted")) and p["status"].get("phase") == "Running" and p,
    )
    instance = world.instance_for(pod)
    assert instance is not None
    try:
        world.kubectl(
            "drain", NODE, "--ignore-daemonsets", "--force", "--timeout=120s", "--grace-period=30"
        )
    finally:
        world.kubectl("uncordon", NODE, check=False)
    assert world.get("pod", "evicted") is None
    assert instance["id"] not in world.runpod.instances
