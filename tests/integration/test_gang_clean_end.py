"""A gang's clean end, through both simulators over loopback HTTP: deleting a Job,
finished or not, prints no LEAK for the cluster we delete on purpose (even one RunPod
made long ago); once RunPod answers 404 for the deleted cluster by id, it leaves `state
show` and the caps at once (one GET, no waiting for a grace); a row kept for a finished
Job's result is no cluster in `state show` either; and a cluster whose DELETE keeps
failing is told once, not on every tick."""

from __future__ import annotations

import logging
from typing import Any

import kubernetes
import pytest
from click.testing import CliRunner

from reconciler.cli.commands import main
from reconciler.core.cluster_row import ClusterState
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.tick.resources.sections import ClusterSection

from .test_clusters import members, running_gang


def _delete_job(box: Sandbox) -> None:
    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )


def _state_show(box: Sandbox) -> str:
    result = CliRunner().invoke(main, ["--database-url", box.database_url, "state", "show"])
    assert result.exit_code == 0, result.output
    return str(result.output)


def _by_id_reads(box: Sandbox, cluster_id: str) -> list[Any]:
    path = f"/v2/clusters/{cluster_id}/pods"
    return [r for r in box.runpod_sim.requests if (r.method, r.path) == ("GET", path)]


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_deleting_a_job_whose_cluster_ran_long_prints_no_leak(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    running_gang(box)
    box.advance(box.settings.timing.orphan_grace_time + 60)  # RunPod made it long ago
    box.tick()
    _delete_job(box)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            assert ClusterSection.of(box.tick()).leaks == []
            box.advance(30)
    assert not [m for m in _errors(caplog) if "LEAK" in m]
    assert box.runpod_sim.clusters == {}


def test_deleting_a_finished_job_prints_no_leak(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    running_gang(box)
    box.advance(box.settings.timing.orphan_grace_time + 60)
    [rank0] = [m["id"] for m in members(box) if m["cluster"]["rank"] == 0]
    box.runpod_sim.exit_process(rank0, 0)
    box.advance(60)
    box.tick()  # rank 0's 0 read: the gang succeeded, its cluster deleted
    assert [p["status"]["phase"] for p in box.job_pods("train")] == ["Succeeded"] * 2
    _delete_job(box)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            assert ClusterSection.of(box.tick()).leaks == []
            box.advance(30)
    assert not [m for m in _errors(caplog) if "LEAK" in m]


def test_a_deleted_cluster_leaves_state_show_once_runpod_says_404(box: Sandbox) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    assert f"cluster {cluster_id}" in _state_show(box)
    _delete_job(box)
    box.tick()  # the DELETE; its row is `deleting`
    assert [r.state for r in box.store.load_clusters()] == [ClusterState.DELETING]
    box.advance(5)
    box.tick()  # the list omits it: one GET by id, 404: gone
    assert len(_by_id_reads(box, cluster_id)) == 1
    assert box.store.load_clusters() == []
    shown = _state_show(box)
    assert "cluster" not in shown and "deleting" not in shown
    box.advance(5)
    box.tick()
    assert len(_by_id_reads(box, cluster_id)) == 1  # nothing more to ask


def test_a_finished_jobs_gone_cluster_is_kept_for_its_result_but_not_shown(box: Sandbox) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    [rank0] = [m["id"] for m in members(box) if m["cluster"]["rank"] == 0]
    box.runpod_sim.exit_process(rank0, 0)
    box.advance(60)
    box.tick()  # the gang succeeded: the DELETE
    box.advance(5)
    box.tick()  # 404 by id: gone, but the Job's finished pods are still on the node
    [row] = box.store.load_clusters()
    assert (row.state, row.exit_code, row.cluster_id) == (ClusterState.GONE, 0, cluster_id)
    shown = _state_show(box)
    assert cluster_id not in shown and "deleting" not in shown
    _delete_job(box)
    box.tick()
    box.tick()
    assert box.store.load_clusters() == []  # no pod of its Job left to settle


def test_a_delete_that_keeps_failing_is_told_once(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    box.advance(box.settings.timing.orphan_grace_time + 60)
    box.tick()
    # Refused outright (a 5xx is retried within the request, with waits of real time).
    box.runpod_sim.faults.inject("DELETE", f"/v2/clusters/{cluster_id}", 409, count=1000)
    _delete_job(box)
    with caplog.at_level(logging.WARNING):
        for _ in range(4):
            report = box.tick()
            assert ClusterSection.of(report).leaks == []
            box.advance(30)
    told = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and cluster_id in r.getMessage()
    ]
    assert len(told) == 1, told
    assert "could not delete" in told[0]
    deletes = [r for r in box.runpod_sim.requests if r.method == "DELETE"]
    assert len({r.path for r in deletes}) == 1 and len(deletes) >= 4  # asked every tick
