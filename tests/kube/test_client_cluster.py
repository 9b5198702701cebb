"""KubeClient cluster-level operations against the simulator: events with dedup (and
occurrences stamped with their own time counted once), the virtual node (build_node,
ensure_node without needless writes, an address no longer advertised taken back), the
node lease heartbeat, leader election on a Lease, Secrets/ConfigMaps decoding, cluster
identity, and RBAC from a manifest file (403 for what is not granted)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.errors import KubeConflict, KubeForbidden
from reconciler.core.config import Settings
from reconciler.core.node.virtual_node import build_node, kubelet_version
from reconciler.runtime.process.leader import Attempt, Change, LeaderElector
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.simulator import KubeSimulator

PodFactory = Callable[..., dict[str, Any]]
NODE = "virtual-runpod"
RBAC_FILE = str(Path(__file__).with_name("rbac.yaml"))
RBAC_SUBJECT = "system:serviceaccount:runpod-system:runpod-reconciler"


def _writes(sim: KubeSimulator) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _, _ in sim.requests if m != "GET"]


def test_record_event_creates_then_counts_repeats(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
    clock: SimClock,
) -> None:
    pod = make_pod("p", node=NODE)

    kube.events.record(pod, "InstanceCreated", "created instance abc on A100", "Normal")
    clock.advance(60)
    kube.events.record(pod, "InstanceCreated", "created instance abc on A100", "Normal")
    kube.events.record(pod, "NoGpuFits", "no GPU type fits", "Warning")

    events = {e["reason"]: e for e in sim.list("events", "default")}
    assert set(events) == {"InstanceCreated", "NoGpuFits"}
    created = events["InstanceCreated"]
    assert created["count"] == 2
    assert created["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert created["lastTimestamp"] == "2026-01-01T00:01:00Z"
    assert created["involvedObject"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": "default",
        "name": "p",
        "uid": pod["metadata"]["uid"],
        "resourceVersion": pod["metadata"]["resourceVersion"],
    }
    assert created["source"] == {"component": "runpod-reconciler"}
    assert events["NoGpuFits"]["type"] == "Warning"


def test_build_node_reflects_settings() -> None:
    settings = Settings.of(
        node_name="burst",
        node_gpus=8,
        node_pods=110,
        node_cpu="64",
        node_memory="512Gi",
        kubelet_address="10.0.0.9",
        kubelet_port=10250,
    )
    node = build_node(settings, SimClock().now(), kubelet_version("v1.31.4-eks-2d5f260"))

    labels = node["metadata"]["labels"]
    assert labels["type"] == "virtual-kubelet"
    assert labels["kubernetes.io/hostname"] == "burst"
    assert labels["node.kubernetes.io/instance-type"] == "runpod"
    assert node["spec"]["taints"] == [
        {"key": "virtual-kubelet.io/provider", "value": "runpod", "effect": "NoSchedule"}
    ]
    expected = {"nvidia.com/gpu": "8", "pods": "110", "cpu": "64", "memory": "512Gi"}
    assert node["status"]["capacity"] == expected == node["status"]["allocatable"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in node["status"]["conditions"]}
    assert conditions["Ready"] == ("True", "KubeletReady")
    assert {conditions[t][0] for t in ("MemoryPressure", "DiskPressure", "PIDPressure")} == {
        "False"
    }
    # Only the InternalIP: an API server would try a Hostname address first.
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.9"}]
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.31.4-runpod-reconciler"


def test_build_node_without_an_endpoint_gives_no_address_or_port() -> None:
    """Port 0 serves nothing: an IP would only make the API server dial a dead address."""
    settings = Settings.of(node_name="burst", kubelet_address="10.0.0.9", kubelet_port=0)
    node = build_node(settings, SimClock().now())
    assert node["status"]["addresses"] == [{"type": "Hostname", "address": "burst"}]
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert "`reconciler logs`" in ready["message"]


def test_build_node_writes_quantities_canonically() -> None:
    node = build_node(
        Settings.of(node_cpu="4000", node_memory="16384Gi", node_gpus=1000, node_pods=110),
        SimClock().now(),
    )
    assert node["status"]["capacity"] == {
        "nvidia.com/gpu": "1k",
        "pods": "110",
        "cpu": "4k",
        "memory": "16Ti",
    }


def test_ensure_node_takes_back_an_address_no_longer_advertised(
    sim: KubeSimulator, kube: KubeClient, clock: SimClock
) -> None:
    """Addresses merge by type: dropping the InternalIP needs a delete directive, or the
    API server would go on dialling it."""
    serving = Settings.of(node_name=NODE, kubelet_address="10.0.0.9")
    kube.node.ensure(build_node(serving, clock.now()))
    kube.node.ensure(build_node(Settings.of(node_name=NODE, kubelet_port=0), clock.now()))
    node = sim.get("nodes", None, NODE) or {}
    assert node["status"]["addresses"] == [{"type": "Hostname", "address": NODE}]
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    kube.node.ensure(build_node(serving, clock.now()))
    node = sim.get("nodes", None, NODE) or {}
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.9"}]


def test_ensure_node_creates_then_writes_only_what_changed(
    sim: KubeSimulator,
    kube: KubeClient,
    clock: SimClock,
) -> None:
    settings = Settings.of(node_name=NODE, node_gpus=4)
    kube.node.ensure(build_node(settings, clock.now()))
    created = sim.get("nodes", None, NODE)
    assert created is not None and created["status"]["capacity"]["nvidia.com/gpu"] == "4"

    sim.requests.clear()
    clock.advance(60)
    kube.node.ensure(build_node(settings, clock.now()))
    assert _writes(sim) == []  # unchanged, heartbeat not due: zero writes

    clock.advance(300)
    kube.node.ensure(build_node(settings, clock.now()))
    assert _writes(sim) == [("PATCH", f"/api/v1/nodes/{NODE}/status")]
    node = sim.get("nodes", None, NODE)
    assert node is not None
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["lastHeartbeatTime"] == "2026-01-01T00:06:00Z"
    assert ready["lastTransitionTime"] == "2026-01-01T00:00:00Z"

    sim.put("nodes", {**node, "metadata": {**node["metadata"], "labels": {"extra": "kept"}}})
    kube.node.ensure(build_node(Settings.of(node_name=NODE, node_gpus=8), clock.now()))
    node = sim.get("nodes", None, NODE)
    assert node is not None
    assert node["metadata"]["labels"]["extra"] == "kept"
    assert node["metadata"]["labels"]["type"] == "virtual-kubelet"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"


def test_node_lease_is_created_and_renewed_on_the_clock(
    sim: KubeSimulator,
    kube: KubeClient,
    clock: SimClock,
) -> None:
    kube.node.renew_lease(NODE)
    clock.advance(10)
    kube.node.renew_lease(NODE, duration_seconds=40)

    lease = sim.get("leases", "kube-node-lease", NODE)
    assert lease is not None
    assert lease["spec"] == {
        "holderIdentity": NODE,
        "leaseDurationSeconds": 40,
        "renewTime": "2026-01-01T00:00:10.000000Z",
    }


def test_leader_election_hands_over_only_after_expiry(
    sim: KubeSimulator,
    kube: KubeClient,
    clock: SimClock,
) -> None:
    sim.put("namespaces", {"metadata": {"name": "runpod-system"}})
    args = ("runpod-system", "runpod-reconciler")

    assert kube.leases.try_acquire(*args, "a", 15, clock.now())
    assert not kube.leases.try_acquire(*args, "b", 15, clock.now())
    clock.advance(10)
    assert kube.leases.try_acquire(*args, "a", 15, clock.now())  # renewal
    clock.advance(14)
    assert not kube.leases.try_acquire(*args, "b", 15, clock.now())
    clock.advance(1)
    taken = kube.leases.try_acquire(*args, "b", 15, clock.now())
    assert taken.won and taken.taken_over_from == "a"
    assert not kube.leases.try_acquire(*args, "a", 15, clock.now())
    assert kube.leases.try_acquire(*args, "b", 15, clock.now()).taken_over_from is None

    lease = sim.get("leases", *args)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    assert lease["spec"]["acquireTime"] == "2026-01-01T00:00:25.000000Z"


def test_leader_election_loses_a_write_race_quietly(
    sim: KubeSimulator,
    kube: KubeClient,
    clock: SimClock,
) -> None:
    assert kube.leases.try_acquire("default", "leader", "a", 15, clock.now())
    clock.advance(20)
    sim.inject_fault("PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/leader", 409)

    assert not kube.leases.try_acquire("default", "leader", "b", 15, clock.now())
    assert kube.leases.try_acquire("default", "leader", "b", 15, clock.now())


def test_release_lease_lets_a_successor_in_at_once(
    sim: KubeSimulator,
    kube: KubeClient,
    clock: SimClock,
) -> None:
    assert kube.leases.try_acquire("default", "leader", "a", 15, clock.now())
    kube.leases.release("default", "leader", "b")  # not b's to release
    assert not kube.leases.try_acquire("default", "leader", "b", 15, clock.now())

    kube.leases.release("default", "leader", "a")

    assert kube.leases.try_acquire("default", "leader", "b", 15, clock.now())


def test_node_lease_renewal_reports_a_lost_race(
    sim: KubeSimulator,
    kube: KubeClient,
    clock: SimClock,
) -> None:
    kube.node.renew_lease(NODE)
    sim.inject_fault(
        "PUT", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}", 409
    )
    clock.advance(10)

    with pytest.raises(KubeConflict):
        kube.node.renew_lease(NODE)
    kube.node.renew_lease(NODE)  # the next heartbeat re-reads and succeeds

    lease = sim.get("leases", "kube-node-lease", NODE)
    assert lease is not None and lease["spec"]["renewTime"] == "2026-01-01T00:00:10.000000Z"


def test_secrets_and_config_maps_are_decoded(sim: KubeSimulator, kube: KubeClient) -> None:
    sim.put(
        "secrets",
        {
            "metadata": {"name": "creds", "namespace": "default"},
            "data": {"token": base64.b64encode(b"s3cr3t").decode()},
            "stringData": {"user": "alice"},
        },
    )
    sim.put(
        "configmaps",
        {
            "metadata": {"name": "cfg", "namespace": "default"},
            "data": {"MODE": "fast"},
            "binaryData": {"blob": base64.b64encode(b"raw").decode()},
        },
    )

    assert kube.secrets.read("default", "creds") == {"token": "s3cr3t", "user": "alice"}
    assert kube.cluster.read_config_map("default", "cfg") == {"MODE": "fast", "blob": "raw"}
    assert kube.secrets.read("default", "missing") is None
    assert kube.cluster.read_config_map("default", "missing") is None


def test_cluster_uid_is_the_kube_system_namespace_uid(
    sim: KubeSimulator,
    kube: KubeClient,
) -> None:
    namespace = sim.get("namespaces", None, "kube-system")
    assert namespace is not None
    assert kube.cluster.uid() == namespace["metadata"]["uid"]


def test_rbac_allows_granted_verbs_and_forbids_the_rest(
    clock: SimClock,
    make_pod: PodFactory,
) -> None:
    with KubeSimulator(clock=clock, rbac_files=[RBAC_FILE], rbac_subject=RBAC_SUBJECT) as sim:
        sim.put("namespaces", {"metadata": {"name": "runpod-system"}})
        pod = sim.create_pod(
            {
                "metadata": {"name": "p"},
                "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
            }
        )
        kube = KubeClient(sim.api_client(), now=clock.now)

        assert [p["metadata"]["name"] for p in kube.pods.list_on_node(NODE)] == ["p"]
        kube.pods.patch_status("default", "p", {"phase": "Running"})
        assert kube.cluster.uid()
        assert kube.leases.try_acquire("runpod-system", "leader", "a", 15, clock.now())

        with pytest.raises(KubeForbidden) as denied:
            kube.pods.delete("default", "p", pod["metadata"]["uid"])
        assert denied.value.status == 403
        assert 'cannot delete resource "pods"' in denied.value.message
        with pytest.raises(KubeForbidden):
            kube.leases.try_acquire("default", "leader", "a", 15, clock.now())
        with pytest.raises(KubeForbidden):
            kube.secrets.read("default", "creds")
        kube.close()


def test_an_occurrence_recorded_again_is_not_counted_again(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
    clock: SimClock,
) -> None:
    """An Event of something that happened elsewhere (a RunPod log line) carries its
    time; reading the same line again (another process, a later run) costs a GET and
    changes nothing, while the same text at a later moment counts as a repeat."""
    pod = make_pod("p", node=NODE)
    pulled = clock.now() - timedelta(seconds=30)
    kube.events.record(pod, "RunPodSystem", "pulling image x", occurred_at=pulled)
    before = len(sim.requests)
    kube.events.record(pod, "RunPodSystem", "pulling image x", occurred_at=pulled)
    assert [m for m, *_ in sim.requests[before:]] == ["POST", "GET"]
    kube.events.record(
        pod, "RunPodSystem", "pulling image x", occurred_at=pulled + timedelta(seconds=20)
    )
    (event,) = sim.list("events", "default")
    assert event["count"] == 2
    assert event["firstTimestamp"] == "2025-12-31T23:59:30Z"
    assert event["lastTimestamp"] == "2025-12-31T23:59:50Z"


def test_event_times_follow_the_injected_clock(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
    clock: SimClock,
) -> None:
    clock.advance(timedelta(hours=2).total_seconds())
    kube.events.record(make_pod("p"), "Started", "started")

    (event,) = sim.list("events", "default")
    assert event["firstTimestamp"] == "2026-01-01T02:00:00Z"


def test_a_new_leader_knows_whose_expired_lease_it_took(
    sim: KubeSimulator,
    kube: KubeClient,
    clock: SimClock,
) -> None:
    sim.put("namespaces", {"metadata": {"name": "runpod-system"}})

    def elector(name: str) -> LeaderElector:
        return LeaderElector(kube, "runpod-system", "leader", name, 15, clock.now, clock.monotonic)

    first, second = elector("host-a/1"), elector("host-b/2")
    assert first.attempt() == (Attempt.WON, Change.STARTED_LEADING)
    assert second.attempt() == (Attempt.REFUSED, None)
    clock.advance(16)  # host-a died: its lease runs out
    assert second.attempt() == (Attempt.WON, Change.STARTED_LEADING)
    assert second.predecessor == "host-a/1" and first.predecessor is None
