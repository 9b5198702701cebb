"""The reconciler as the kubelet of its pods, toward the strict Kubernetes simulator over
HTTP (official client, real kubectl): a deleted pod ends in a terminal phase before it
goes (also when finalizers hold it, and for Jobs that replace only failed pods), status
patches a real API server accepts when the instance's IP changes, conditions without
stale reasons, restarts with lastState, complete container statuses for every
container, and kubectl's STATUS column."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.sandbox import Sandbox
from reconciler.sim.kube.jobs import TRACKING_FINALIZER
from reconciler.sim.kube.resources import PODS
from reconciler.sim.kube.simulator import KubeSimulator

MERGE = "application/merge-patch+json"


def running(box: Sandbox, name: str, **pod: Any) -> dict[str, Any]:
    """A pod whose instance serves: created, booted, mirrored."""
    box.add_pod(name, **pod)
    return running_made(box, name)


def container(pod: dict[str, Any], name: str = "main") -> dict[str, Any]:
    return next(s for s in pod["status"]["containerStatuses"] if s["name"] == name)


def refused(box: Sandbox) -> list[tuple[str, str, str, int]]:
    return [r for r in box.kube_sim.requests if r[3] >= 400 and r[3] != 404]


def test_a_deleted_pod_held_by_a_finalizer_ends_terminal_and_its_instance_goes(
    box: Sandbox,
) -> None:
    pod = running(box, "web", ports=[22])
    box.kube_sim.store.patch(
        PODS, "default", "web", MERGE, {"metadata": {"finalizers": ["example.com/keep"]}}
    )
    box.kube_sim.delete_pod("default", "web", grace_seconds=30)
    box.tick()  # terminate the instance
    assert box.instance_for(pod) is None
    assert (box.pod("web") or {})["status"]["phase"] == "Running"  # not before it is gone
    box.tick()  # confirmed gone: terminal phase, then delete
    held = box.pod("web") or {}
    assert held["status"]["phase"] == "Failed"
    terminated = container(held)["state"]["terminated"]
    assert terminated["reason"] == "Error" and terminated["exitCode"] == 137
    assert {c["type"]: c["status"] for c in held["status"]["conditions"]}["Ready"] == "False"
    assert held["metadata"]["deletionGracePeriodSeconds"] == 0
    assert container(held)["imageID"] == "python:3.11"  # what ran, kept to the end
    before = len(box.kube_sim.requests)
    box.tick()  # nothing left to do: the finalizer's owner finishes it
    writes = [r for r in box.kube_sim.requests[before:] if r[0] != "GET" and "/pods/" in r[1]]
    assert writes == []
    assert refused(box) == []


def test_a_deleted_pending_pod_without_instance_ends_failed(box: Sandbox) -> None:
    box.add_pod("early")
    box.kube_sim.store.patch(
        PODS, "default", "early", MERGE, {"metadata": {"finalizers": ["example.com/keep"]}}
    )
    box.kube_sim.delete_pod("default", "early", grace_seconds=30)
    box.tick()
    pod = box.pod("early") or {}
    assert pod["status"]["phase"] == "Failed"
    assert container(pod)["state"]["terminated"]["reason"] == "ContainerStatusUnknown"
    assert box.owned_instances() == []


def _job_pod(box: Sandbox, **spec: Any) -> dict[str, Any]:
    """A Job of one pod on the virtual node; its pod (the Job controller's), running."""
    box.add_job("train", command=["python", "train.py"], **spec)
    [pod] = box.job_pods("train")
    return running_made(box, pod["metadata"]["name"])


def running_made(box: Sandbox, name: str) -> dict[str, Any]:
    """The pod `name`, made already, once its instance serves: booted, mirrored."""
    box.tick()
    box.advance(30)
    box.tick()
    box.tick()
    found = box.pod(name) or {}
    assert found["status"]["phase"] == "Running", found["status"]
    return found


def _job_status(box: Sandbox) -> dict[str, Any]:
    return dict((box.kube_sim.get("jobs", "default", "train") or {}).get("status") or {})


def test_a_deleted_job_pod_that_only_failed_pods_replace_is_finished_and_counted(
    box: Sandbox,
) -> None:
    pod = _job_pod(box, podReplacementPolicy="Failed")
    name = pod["metadata"]["name"]
    assert pod["metadata"]["finalizers"] == [TRACKING_FINALIZER]
    box.kube_sim.delete_pod("default", name, grace_seconds=30)
    box.tick()
    box.tick()
    assert box.pod(name) is None  # not stuck Terminating
    assert box.instance_for(pod) is None
    assert _job_status(box)["failed"] == 1


def test_a_finished_job_pod_is_counted_by_its_job(box: Sandbox) -> None:
    pod = _job_pod(box, podReplacementPolicy="Failed")
    instance = box.instance_for(pod)
    assert instance is not None
    box.runpod_sim.exit_process(instance["id"], 0)
    box.tick()
    done = box.pod(pod["metadata"]["name"]) or {}
    assert done["status"]["phase"] == "Succeeded"
    assert list(container(done)["state"]) == ["terminated"]
    assert "finalizers" not in done["metadata"]
    status = _job_status(box)
    assert status["succeeded"] == 1
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]


def test_an_ip_change_puts_the_new_ip_on_the_pod(box: Sandbox) -> None:
    pod = running(box, "web", ports=[22])
    instance = box.instance_for(pod)
    assert instance is not None
    box.runpod_sim.move_instance(instance["id"], "198.51.100.77")
    box.tick()
    status = (box.pod("web") or {})["status"]
    assert status["hostIP"] == "198.51.100.77" and status["hostIPs"] == [{"ip": "198.51.100.77"}]
    assert "podIP" not in status
    assert refused(box) == []


def test_ready_conditions_carry_no_stale_reason(box: Sandbox) -> None:
    box.add_pod("web", ports=[22])
    box.tick()
    box.tick()
    waiting = {c["type"]: c for c in (box.pod("web") or {})["status"]["conditions"]}
    assert waiting["Ready"]["reason"] == "ContainersNotReady"
    box.advance(30)
    box.tick()
    ready = {c["type"]: c for c in (box.pod("web") or {})["status"]["conditions"]}
    assert ready["Ready"]["status"] == "True"
    assert "reason" not in ready["Ready"] and "message" not in ready["Ready"]


def test_a_restart_counts_and_sets_last_state(box: Sandbox) -> None:
    pod = running(box, "svc", ports=[22])
    first_start = container(pod)["state"]["running"]["startedAt"]
    instance = box.instance_for(pod)
    assert instance is not None
    box.advance(120)
    box.runpod_sim.exit_process(instance["id"], 1)  # RunPod restarts the container
    box.advance(5)
    box.tick()
    status = container(box.pod("svc") or {})
    assert status["restartCount"] == 1
    last = status["lastState"]["terminated"]
    assert last["startedAt"] == first_start and last["reason"] == "ContainerStatusUnknown"
    assert status["state"]["running"]["startedAt"] > first_start
    box.advance(60)
    box.tick()
    assert container(box.pod("svc") or {})["restartCount"] == 1  # counted once
    assert refused(box) == []


def test_every_container_has_a_complete_status_and_readiness_agrees(box: Sandbox) -> None:
    sidecar = {"name": "istio-proxy", "image": "istio/proxyv2:1.24"}
    box.kube_sim.create_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "mesh", "namespace": "default"},
            "spec": {
                "nodeName": box.settings.node.name,
                "containers": [
                    {
                        "name": "main",
                        "image": "python:3.11",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        "ports": [{"containerPort": 22, "protocol": "TCP"}],
                    },
                    sidecar,
                ],
            },
        }
    )
    box.tick()
    box.advance(30)
    box.tick()
    box.tick()
    with box.kube_sim.api_client() as api_client:
        typed = client.CoreV1Api(api_client).read_namespaced_pod("mesh", "default")
    statuses = {s.name: s for s in typed.status.container_statuses}
    assert set(statuses) == {"main", "istio-proxy"}
    assert statuses["main"].ready and statuses["main"].image_id == "python:3.11"
    assert not statuses["istio-proxy"].ready
    assert statuses["istio-proxy"].state.waiting.reason == "NotRunOnRunPod"
    conditions = {c.type: c for c in typed.status.conditions}
    assert conditions["Ready"].status == "False"
    assert conditions["Ready"].message == "containers with unready status: [istio-proxy]"
    assert refused(box) == []


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_get_pod_shows_the_reason(box: Sandbox, tmp_path: Path) -> None:
    box.add_pod("web", ports=[22])
    box.tick()
    box.tick()
    # kubectl sends its token only over TLS and the sandbox's API server speaks plain
    # HTTP: a second, TLS front end serves the same store (two API servers, one etcd).
    with KubeSimulator(clock=box.clock, tls=True) as tls:
        tls.store = box.kube_sim.store
        kubeconfig = tls.write_kubeconfig(str(tmp_path / "kubeconfig"))
        done = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, "get", "pod", "web"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["web", "0/1", "ContainerCreating", "0"]
