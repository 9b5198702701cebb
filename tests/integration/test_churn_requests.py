"""What replacing a pod costs in Kubernetes requests, end to end through both simulators:
the deleted pod's instance is terminated and the pod finalized like a kubelet does (an
Event, its terminal phase, a DELETE), and
the new pod's status and the annotations that name its instance travel together in one
pods/status request per change (Pending with its instance, then Running), with the
Events a user must see: the instance created and the instance terminated (no
Event repeats what the status says). No separate metadata PATCH is sent."""

from __future__ import annotations

from collections import Counter

from reconciler.demo.sandbox import Sandbox


def pod_writes(box: Sandbox) -> Counter[str]:
    """Kubernetes requests that write something about pods (not lists, not the node)."""
    kinds: Counter[str] = Counter()
    for method, path, _query, _status in box.kube_sim.requests:
        if method == "GET" or "/leases/" in path or "/nodes" in path:
            continue
        parts = path.strip("/").split("/")
        kinds[f"{method} {'/'.join(parts[4:5] + parts[6:7])}"] += 1
    return kinds


def test_replacing_a_pod_costs_six_requests(box: Sandbox) -> None:
    box.add_pod("old", ports=[8080])
    for _ in range(4):  # created, mirrored while provisioning, running
        box.tick()
        box.advance(10)
    assert (box.pod("old") or {})["status"]["phase"] == "Running"
    box.kube_sim.requests.clear()

    box.kube_sim.delete_pod("default", "old", 30)
    box.add_pod("new", ports=[8080])
    for _ in range(4):
        box.tick()
        box.advance(10)
    assert box.pod("old") is None
    new = box.pod("new") or {}
    assert new["status"]["phase"] == "Running"
    assert new["metadata"]["annotations"]["runpod.io/pod-id"]
    assert pod_writes(box) == Counter(
        {
            "POST events": 2,  # TerminatingInstance, CreatedInstance
            # The new pod: Pending with the instance's annotations, then Running; the old
            # pod: its terminal phase before its DELETE.
            "PATCH pods/status": 3,
            "DELETE pods": 1,  # the old pod, once its instance is gone
        }
    )
