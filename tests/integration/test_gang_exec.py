"""`kubectl exec`, `cp` and `port-forward` into every member of a gang, end to end: the
real kubectl, the Kubernetes simulator (TLS, SPDY to the kubelet endpoint), the endpoint
over SSH to each Instant Cluster member's own sshd on the RunPod simulator. Index i
reaches the member of rank i; the address is RunPod's (the tick's list, or one
`GET /v2/clusters/{id}/pods` of the cluster our row names), never an annotation: a
forged `runpod.io/pod-id` changes nothing; a pod of a gang with no cluster is not
running; the GPU gauge shows each member like a single pod's instance."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import requests

from reconciler.demo.sandbox import Sandbox

from .test_kubectl_exec import kubectl, kubectl_env

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.enable_ssh(str(tmp_path / "reconciler-ssh-key"))
        sandbox.start_kubelet()
        sandbox.add_indexed_job("train", 2)
        sandbox.tick()
        sandbox.advance(30)
        sandbox.tick()
        yield sandbox


def _members_by_rank(box: Sandbox) -> dict[int, dict[str, Any]]:
    found = [p for p in box.runpod_sim.instances.values() if "cluster" in p]
    return {m["cluster"]["rank"]: m for m in found}


def _pod_of_index(box: Sandbox, index: int) -> str:
    for pod in box.job_pods("train"):
        annotations = pod["metadata"]["annotations"]
        if annotations["batch.kubernetes.io/job-completion-index"] == str(index):
            return str(pod["metadata"]["name"])
    raise AssertionError(f"no pod of index {index}")


def test_exec_reaches_each_members_own_sshd(box: Sandbox) -> None:
    members = _members_by_rank(box)
    for index in (0, 1):
        pod = _pod_of_index(box, index)
        done = kubectl(box, "exec", pod, "--", "sh", "-c", f"echo {index} > /tmp/rank; echo ok")
        assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
    for rank, member in members.items():
        assert (box.runpod_sim.ssh.sandbox(member["id"]) / "tmp" / "rank").read_text() == (
            f"{rank}\n"
        )


def test_exec_before_any_tick_of_this_process_reads_the_cluster_by_id(box: Sandbox) -> None:
    box.restart()  # a new process: no list seen yet
    box.start_kubelet()
    cluster_id = next(iter(_members_by_rank(box).values()))["cluster"]["id"]
    seen = len(box.runpod_sim.requests)
    done = kubectl(box, "exec", _pod_of_index(box, 1), "--", "echo", "hi")
    assert (done.returncode, done.stdout) == (0, "hi\n"), done.stderr
    asked = [(r.method, r.path) for r in box.runpod_sim.requests[seen:]]
    assert asked == [("GET", f"/v2/clusters/{cluster_id}/pods")]


def test_cp_and_port_forward_on_a_member(box: Sandbox, tmp_path: Path) -> None:
    members = _members_by_rank(box)
    pod = _pod_of_index(box, 1)
    local = tmp_path / "data.txt"
    local.write_text("payload\n")
    done = kubectl(box, "cp", str(local), f"{pod}:/tmp/data.txt")
    assert done.returncode == 0, done.stderr
    copied = box.runpod_sim.ssh.sandbox(members[1]["id"]) / "tmp" / "data.txt"
    assert copied.read_text() == "payload\n"
    box.runpod_sim.ssh.serve_http(members[1]["id"], 8080, "from rank 1")
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "port-forward", pod, ":8080"],
        stdout=subprocess.PIPE,
        text=True,
        env=kubectl_env(False),
    )
    try:
        assert process.stdout is not None
        local_port = int(process.stdout.readline().split("127.0.0.1:")[1].split()[0])
        answer = requests.get(f"http://127.0.0.1:{local_port}/", timeout=30)
    finally:
        process.terminate()
        process.wait(30)
    assert answer.text == "from rank 1"


def test_a_forged_member_id_annotation_changes_nothing(box: Sandbox) -> None:
    members = _members_by_rank(box)
    pod = _pod_of_index(box, 1)
    kubernetes.client.CoreV1Api(box.kube_sim.api_client()).patch_namespaced_pod(
        pod, "default", {"metadata": {"annotations": {"runpod.io/pod-id": members[0]["id"]}}}
    )
    done = kubectl(box, "exec", pod, "--", "sh", "-c", "touch /tmp/here")
    assert done.returncode == 0, done.stderr
    assert (box.runpod_sim.ssh.sandbox(members[1]["id"]) / "tmp" / "here").exists()
    assert not (box.runpod_sim.ssh.sandbox(members[0]["id"]) / "tmp" / "here").exists()


def test_a_gang_without_a_cluster_is_not_running(tmp_path: Path) -> None:
    with Sandbox(tls=True) as box:
        box.enable_ssh(str(tmp_path / "key"))
        box.start_kubelet()
        box.add_indexed_job("wait", 2, parallelism=1)  # never a cluster
        box.tick()
        [pod] = box.job_pods("wait")
        done = kubectl(box, "exec", pod["metadata"]["name"], "--", "true")
        assert done.returncode != 0
        assert "is not running" in done.stderr


def test_the_gpu_gauge_shows_each_member(box: Sandbox) -> None:
    report = box.tick()
    shown = {(g.pod, g.gpu) for g in report.gpus}
    assert {(p["metadata"]["name"], 0) for p in box.job_pods("train")} <= shown
