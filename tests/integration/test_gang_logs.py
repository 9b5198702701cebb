"""A finished gang's logs are kept like a finished pod's, end to end with the real
kubectl: before a gang's cluster is deleted (rank 0's result, a member's failure), each
member's last lines (the logs setting's count, the batch wrapper's own lines left out)
are read, one request per member, and `kubectl logs` serves them for every rank after
the members are gone, with no RunPod request; the kept lines go once the pods leave the
node; a Job deleted while it runs keeps nothing (its pods go too)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from reconciler.demo.sandbox import Sandbox

from .test_kubectl_logs import kubectl

pytestmark = [
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
    # The simulator plays the API server, which does not verify a kubelet's serving
    # certificate unless started with --kubelet-certificate-authority (self-signed here).
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.start_kubelet()
        sandbox.add_indexed_job("train", 2)
        sandbox.tick()
        sandbox.advance(30)
        sandbox.tick()
        yield sandbox


def _members_by_rank(box: Sandbox) -> dict[int, dict[str, Any]]:
    found = [p for p in box.runpod_sim.instances.values() if "cluster" in p]
    return {m["cluster"]["rank"]: m for m in found}


def _pod_of_index(box: Sandbox, index: int) -> dict[str, Any]:
    for pod in box.job_pods("train"):
        annotations = pod["metadata"]["annotations"]
        if annotations["batch.kubernetes.io/job-completion-index"] == str(index):
            return pod
    raise AssertionError(f"no pod of index {index}")


def _log_reads(box: Sandbox) -> list[Any]:
    return [r for r in box.runpod_sim.requests if r.path.endswith("/logs")]


def _printed(box: Sandbox, lines: int) -> dict[int, list[str]]:
    printed = {}
    for rank, member in _members_by_rank(box).items():
        printed[rank] = [f"rank {rank} step {n}" for n in range(lines)]
        box.runpod_sim.logs.write_container(member["id"], printed[rank])
    return printed


def test_each_ranks_last_lines_are_served_after_the_gang_succeeded(box: Sandbox) -> None:
    printed = _printed(box, 1200)
    box.runpod_sim.exit_process(_members_by_rank(box)[0]["id"], 0)
    box.advance(60)
    reads = len(_log_reads(box))
    box.tick()  # rank 0's 0 read; each member's lines kept; the DELETE
    assert box.runpod_sim.clusters == {}
    assert len(_log_reads(box)) - reads == 1 + 2  # the result, then one per member
    box.advance(5)
    box.tick()
    seen = len(box.runpod_sim.requests)
    for rank in (0, 1):
        name = _pod_of_index(box, rank)["metadata"]["name"]
        assert _pod_of_index(box, rank)["status"]["phase"] == "Succeeded"
        shown = kubectl(box, "logs", name).stdout.splitlines()
        assert shown == printed[rank][-1000:]  # the logs setting's count, wrapper left out
        assert kubectl(box, "logs", name, "--tail", "2").stdout.splitlines() == printed[rank][-2:]
    assert box.runpod_sim.requests[seen:] == []  # served from what was kept


def test_a_failed_gangs_lines_are_kept_too(box: Sandbox) -> None:
    printed = _printed(box, 3)
    box.runpod_sim.fail_instance(_members_by_rank(box)[1]["id"])
    box.tick()
    assert box.runpod_sim.clusters == {}
    failed = [p for p in box.job_pods("train") if p["status"]["phase"] == "Failed"]
    assert len(failed) == 2
    for pod in failed:
        rank = int(pod["metadata"]["annotations"]["runpod.io/rank"])
        shown = kubectl(box, "logs", pod["metadata"]["name"]).stdout.splitlines()
        assert shown[-3:] == printed[rank]


def test_kept_lines_go_with_the_pods(box: Sandbox) -> None:
    _printed(box, 2)
    box.runpod_sim.exit_process(_members_by_rank(box)[0]["id"], 0)
    box.advance(60)
    box.tick()
    uids = [p["metadata"]["uid"] for p in box.job_pods("train")]
    assert all(box.store.saved_logs.read(uid) for uid in uids)
    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    box.tick()
    box.tick()
    assert box.job_pods("train") == []
    assert [box.store.saved_logs.read(uid) for uid in uids] == [None, None]


def test_a_job_deleted_while_running_keeps_nothing_and_reads_nothing(box: Sandbox) -> None:
    _printed(box, 2)
    reads = len(_log_reads(box))
    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    box.tick()
    assert box.runpod_sim.clusters == {}
    assert len(_log_reads(box)) == reads
