"""End to end through both simulators over real HTTP: a pod's whole life on RunPod
(create, boot, Running with endpoints, delete), batch exits, instance errors and
losses, Events and the steady-state tick that writes nothing."""

from __future__ import annotations

from typing import Any

from reconciler.core.reasons import Notice, PodReason
from reconciler.demo.sandbox import Sandbox


def phase(box: Sandbox, name: str) -> str | None:
    pod = box.pod(name)
    return None if pod is None else pod.get("status", {}).get("phase")


def waiting_reason(pod: dict[str, Any]) -> str | None:
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return (statuses[0].get("state", {}).get("waiting") or {}).get("reason")


def reasons(box: Sandbox, name: str) -> list[str]:
    return [e["reason"] for e in box.events(name)]


def test_pod_runs_on_runpod_then_deleting_it_removes_instance_and_pod(box: Sandbox) -> None:
    box.add_pod("web", ports=[8888, 22])
    box.tick()
    instance = box.instance_for(box.pod("web") or {})
    assert instance is not None and Notice.CREATED_INSTANCE in reasons(box, "web")
    box.tick()
    pod = box.pod("web") or {}
    assert phase(box, "web") == "Pending" and waiting_reason(pod) == "ContainerCreating"

    box.advance(30)
    box.tick()
    pod = box.pod("web") or {}
    assert phase(box, "web") == "Running"
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "True"
    annotations = pod["metadata"]["annotations"]
    assert annotations["runpod.io/pod-id"] == instance["id"]
    assert annotations["runpod.io/public-ip"] == pod["status"]["hostIP"]
    assert "22/tcp->" in annotations["runpod.io/port-mappings"]
    assert float(annotations["runpod.io/cost-per-hr"]) > 0

    box.kube_sim.delete_pod("default", "web", grace_seconds=30)
    box.tick()
    assert box.instance_for(pod) is None
    assert box.pod("web") is not None  # still Terminating until the instance is confirmed gone
    box.tick()
    assert box.pod("web") is None


def test_steady_state_tick_writes_nothing_but_its_tick_row(box: Sandbox) -> None:
    box.add_pod("web", ports=[22])
    box.tick()
    box.advance(30)
    box.tick()
    box.tick()  # settles the metadata patch
    runpod_before, kube_before = len(box.runpod_sim.requests), len(box.kube_sim.requests)
    journal_before = len(box.store.journal())
    report = box.tick()
    assert report.planned == {}
    runpod_calls = box.runpod_sim.requests[runpod_before:]
    assert [(r.method, r.path) for r in runpod_calls] == [("GET", "/v2/pods")]
    kube_writes = [r for r in box.kube_sim.requests[kube_before:] if r[0] != "GET"]
    assert [r[1] for r in kube_writes] == [
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/virtual-runpod"
    ]
    assert len(box.store.journal()) == journal_before


def test_batch_pod_exit_zero_succeeds_and_frees_the_instance(box: Sandbox) -> None:
    box.add_pod("job", command=["python", "train.py"], restart_policy="Never")
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("job") or {})
    assert instance is not None
    assert instance["env"]["RUNPOD_RECONCILER_STOP_ON_EXIT"]  # the wrapper's nonce
    box.runpod_sim.exit_process(instance["id"], 0)
    box.tick()
    assert phase(box, "job") == "Succeeded"
    assert box.instance_for(box.pod("job") or {}) is None


def test_batch_pod_exit_three_fails_with_its_exit_code(box: Sandbox) -> None:
    box.add_pod("job", command=["sh", "-c", "exit 3"], restart_policy="Never")
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("job") or {})
    assert instance is not None
    box.runpod_sim.exit_process(instance["id"], 3)
    box.tick()
    pod = box.pod("job") or {}
    assert phase(box, "job") == "Failed"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    assert box.instance_for(pod) is None


def test_long_running_pod_survives_its_process_restarting(box: Sandbox) -> None:
    box.add_pod("svc", ports=[22])
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("svc") or {})
    assert instance is not None
    box.runpod_sim.exit_process(instance["id"], 1)  # RunPod restarts the container
    box.tick()
    assert phase(box, "svc") == "Running"
    assert box.instance_for(box.pod("svc") or {}) is not None


def test_runpod_error_fails_the_pod(box: Sandbox) -> None:
    """Even before the instance ever ran (here still provisioning): ERROR is RunPod's word
    that it broke, not a start that did not finish (those are judged on instances still
    starting, `core.plan.starts`), so the pod is not placed again."""
    box.add_pod("bad")
    box.tick()
    instance = box.instance_for(box.pod("bad") or {})
    assert instance is not None
    box.runpod_sim.fail_instance(instance["id"])
    box.tick()
    assert phase(box, "bad") == "Failed"
    assert (box.pod("bad") or {})["status"]["reason"] == PodReason.INSTANCE_ERROR
    assert box.instance_for(box.pod("bad") or {}) is None
    for _ in range(3):
        box.advance(box.settings.timing.create_grace_time + 1)
        box.tick()
    made = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods")]
    assert len(made) == 1 and phase(box, "bad") == "Failed"


def test_instance_deleted_behind_our_back_fails_the_pod_instance_lost(box: Sandbox) -> None:
    box.add_pod("lost")
    box.tick()
    instance = box.instance_for(box.pod("lost") or {})
    assert instance is not None
    box.runpod_sim.vanish(instance["id"])
    box.advance(box.settings.timing.create_grace_time + 1)
    box.tick()
    pod = box.pod("lost") or {}
    assert pod["status"]["phase"] == "Failed" and pod["status"]["reason"] == PodReason.INSTANCE_LOST
    assert PodReason.INSTANCE_LOST in reasons(box, "lost")
    box.tick()
    assert box.instance_for(pod) is None  # never re-created: finished work stays finished


def test_missing_secret_keeps_the_pod_pending_until_it_exists(box: Sandbox) -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]
    box.add_pod("needs", env=env)
    box.tick()
    pod = box.pod("needs") or {}
    assert phase(box, "needs") == "Pending"
    assert waiting_reason(pod) == PodReason.CREATE_CONTAINER_CONFIG_ERROR
    assert box.instance_for(pod) is None
    box.kube_sim.put(
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf", "namespace": "default"},
            "data": {"token": "c2VjcmV0LXZhbHVl"},
        },
    )
    box.tick()
    instance = box.instance_for(pod)
    assert instance is not None and instance["env"]["TOKEN"] == "secret-value"


def test_secret_values_never_reach_the_database_or_the_journal(box: Sandbox) -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]
    box.kube_sim.put(
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf", "namespace": "default"},
            "data": {"token": "c2VjcmV0LXZhbHVl"},
        },
    )
    box.add_pod("needs", env=env)
    box.tick()
    box.advance(30)
    box.tick()
    database = (box.workdir / "reconciler.db").read_bytes()
    wal = box.workdir / "reconciler.db-wal"
    assert b"secret-value" not in database
    assert not wal.exists() or b"secret-value" not in wal.read_bytes()


def test_node_is_registered_and_its_lease_renewed(box: Sandbox) -> None:
    box.tick()
    node = box.kube_sim.get("nodes", None, "virtual-runpod") or {}
    assert node["metadata"]["labels"]["type"] == "virtual-kubelet"
    assert {
        "key": "virtual-kubelet.io/provider",
        "value": "runpod",
        "effect": "NoSchedule",
    } in node["spec"]["taints"]
    lease = box.kube_sim.get("leases", "kube-node-lease", "virtual-runpod") or {}
    first = lease["spec"]["renewTime"]
    box.advance(10)
    box.tick()
    lease = box.kube_sim.get("leases", "kube-node-lease", "virtual-runpod") or {}
    assert lease["spec"]["renewTime"] != first
