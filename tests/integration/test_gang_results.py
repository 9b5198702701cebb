"""How a gang ends, end to end through both simulators: RunPod gives a cluster member no
stop, so the reconciler reads rank 0's last log line for its wrapper's exit-code marker,
at most once per --gang-result-interval while rank 0 runs. Rank 0's 0 makes every pod
Succeeded and the Job Complete; any other code fails the gang, and the Job retries it;
another rank finishing first changes nothing; an interval of 0 never reads; the pods'
activeDeadlineSeconds fails the gang. Each end deletes the cluster once, and a crash
around that DELETE loses neither the result nor the DELETE."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.demo.sandbox import Sandbox
from reconciler.sim.runpod.http import SimRequest

from .crashing import crash_in

INTERVAL = 60  # the default --gang-result-interval


def members(box: Sandbox) -> list[dict[str, Any]]:
    return [pod for pod in box.runpod_sim.instances.values() if "cluster" in pod]


def rank(box: Sandbox, which: int) -> str:
    [member] = [m["id"] for m in members(box) if m["cluster"]["rank"] == which]
    return member


def log_reads(box: Sandbox) -> list[SimRequest]:
    """Reads of rank 0's result (its last container line); not the reads that keep each
    member's last lines when the gang ends (tests/integration/test_gang_logs.py)."""
    return [
        r
        for r in box.runpod_sim.requests
        if r.path.endswith("/logs") and r.query == {"source": "container", "tail": "1"}
    ]


def cluster_deletes(box: Sandbox) -> list[SimRequest]:
    return [r for r in box.runpod_sim.requests if r.method == "DELETE"]


def running_gang(box: Sandbox, **job: Any) -> list[dict[str, Any]]:
    """A gang of 2 whose members run: the tick that first sees them read rank 0 once."""
    box.add_indexed_job("train", 2, **job)
    box.tick()
    box.advance(30)
    box.tick()
    pods = box.job_pods("train")
    assert [p["status"]["phase"] for p in pods] == ["Running", "Running"]
    return pods


def phases(box: Sandbox) -> list[str]:
    return [p["status"]["phase"] for p in box.job_pods("train")]


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


def job_conditions(box: Sandbox) -> set[str]:
    job = box.kube_sim.get("jobs", "default", "train")
    assert job is not None
    return {c["type"] for c in job["status"].get("conditions") or [] if c["status"] == "True"}


def test_rank_0_exiting_0_completes_every_index_and_deletes_the_cluster(box: Sandbox) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    box.runpod_sim.exit_process(rank(box, 0), 0)
    box.advance(INTERVAL)
    box.tick()
    pods = box.job_pods("train")
    assert [p["status"]["phase"] for p in pods] == ["Succeeded", "Succeeded"]
    assert [terminated(p)["exitCode"] for p in pods] == [0, 0]
    assert [r.path for r in cluster_deletes(box)] == [f"/v2/clusters/{cluster_id}"]
    assert box.runpod_sim.clusters == {}
    assert "Complete" in job_conditions(box)
    [row] = box.store.load_clusters()
    assert (row.state.value, row.exit_code) == ("deleting", 0)
    assert row.delete_answered_at is not None  # only an answered DELETE pauses the next
    box.advance(INTERVAL)
    box.tick()
    box.tick()
    assert len(cluster_deletes(box)) == 1 and phases(box) == ["Succeeded", "Succeeded"]


def test_rank_0_failing_fails_the_gang_and_the_job_retries_it(box: Sandbox) -> None:
    running_gang(box)
    box.runpod_sim.exit_process(rank(box, 0), 3)
    box.advance(INTERVAL)
    box.tick()
    assert box.runpod_sim.clusters == {}
    failed = [p for p in box.kube_sim.list("pods", "default") if p["status"]["phase"] == "Failed"]
    by_index = {p["metadata"]["annotations"]["runpod.io/rank"]: p for p in failed}
    assert terminated(by_index["0"])["exitCode"] == 3
    assert by_index["1"]["status"]["reason"] == "ClusterMemberFailed"
    assert "rank 0 of cluster" in by_index["1"]["status"]["message"]
    assert "Complete" not in job_conditions(box)
    box.tick()  # the Job made the gang again: a new cluster
    posts = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    assert len(posts) == 2 and len(box.runpod_sim.clusters) == 1


def test_another_rank_finishing_first_changes_nothing(box: Sandbox) -> None:
    running_gang(box)
    box.runpod_sim.exit_process(rank(box, 1), 0)
    box.advance(INTERVAL)
    box.tick()
    assert phases(box) == ["Running", "Running"] and len(box.runpod_sim.clusters) == 1
    box.runpod_sim.exit_process(rank(box, 0), 0)
    box.advance(INTERVAL)
    box.tick()
    assert phases(box) == ["Succeeded", "Succeeded"]


def test_rank_0_is_read_at_most_once_per_interval(box: Sandbox) -> None:
    running_gang(box)
    [first] = log_reads(box)
    assert first.path == f"/v2/pods/{rank(box, 0)}/logs"
    assert first.query == {"source": "container", "tail": "1"}
    for _ in range(5):
        box.advance(INTERVAL / 6)
        box.tick()
    assert len(log_reads(box)) == 1
    box.advance(INTERVAL / 6)
    box.tick()
    box.tick()
    assert len(log_reads(box)) == 2


def test_the_cadence_survives_a_restart(box: Sandbox) -> None:
    running_gang(box)
    box.restart()
    box.advance(INTERVAL / 2)
    box.tick()
    assert len(log_reads(box)) == 1


def test_an_interval_of_0_never_reads(box: Sandbox) -> None:
    box.configure(gang_result_interval=0)
    running_gang(box)
    box.runpod_sim.exit_process(rank(box, 0), 0)
    for _ in range(3):
        box.advance(INTERVAL)
        box.tick()
    assert log_reads(box) == []
    assert phases(box) == ["Running", "Running"]


def test_past_the_deadline_the_gang_fails_and_its_cluster_goes(box: Sandbox) -> None:
    names = [p["metadata"]["name"] for p in running_gang(box, active_deadline_seconds=120)]
    cluster_id = members(box)[0]["cluster"]["id"]
    box.advance(60)
    box.tick()
    assert phases(box) == ["Running", "Running"]
    box.advance(61)
    box.tick()
    pods = [box.pod(name) or {} for name in names]
    assert [p["status"]["phase"] for p in pods] == ["Failed", "Failed"]
    assert {p["status"]["reason"] for p in pods} == {"DeadlineExceeded"}
    assert [r.path for r in cluster_deletes(box)] == [f"/v2/clusters/{cluster_id}"]
    assert box.runpod_sim.clusters == {}


def test_a_steady_tick_after_a_recent_read_makes_one_request(box: Sandbox) -> None:
    running_gang(box)
    box.advance(INTERVAL / 2)
    box.tick()
    seen = len(box.runpod_sim.requests)
    box.tick()
    assert [(r.method, r.path) for r in box.runpod_sim.requests[seen:]] == [("GET", "/v2/pods")]


@pytest.mark.parametrize("point", ["after-cluster-deleting", "after-cluster-delete"])
def test_a_crash_around_the_delete_keeps_the_result(box: Sandbox, point: str) -> None:
    running_gang(box)
    box.runpod_sim.exit_process(rank(box, 0), 0)
    box.advance(INTERVAL)
    crash_in(box, point)
    box.tick()
    box.tick()
    assert phases(box) == ["Succeeded", "Succeeded"]
    assert box.runpod_sim.clusters == {}
    assert "Complete" in job_conditions(box)


def test_the_members_wrapper_waits_instead_of_stopping(box: Sandbox) -> None:
    """A member's stop would be refused (409): its wrapper never calls the action route."""
    box.add_indexed_job("train", 2)
    box.tick()
    [post] = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    args = post.body["args"]
    assert "RUNPOD_RECONCILER_EXIT_CODE=" in args and "/action" not in args


def test_a_gang_that_ended_just_before_its_deadline_succeeds(box: Sandbox) -> None:
    """At the deadline rank 0 is read once more, whatever the interval says."""
    running_gang(box, active_deadline_seconds=120)  # started now: read, no marker
    box.advance(100)
    box.tick()  # read: no marker yet
    box.runpod_sim.exit_process(rank(box, 0), 0)
    box.advance(21)  # past the deadline, 21 s after the last read
    box.tick()
    assert phases(box) == ["Succeeded", "Succeeded"]
    assert len(log_reads(box)) == 3


def test_a_crash_before_a_failed_gangs_delete_leaves_no_cluster(box: Sandbox) -> None:
    """A member fails before its pods ever showed their cluster, and the process dies
    between the recorded end and the DELETE: the next ticks fail the pods from the
    record and send the DELETE then, not a pause later."""
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(30)
    names = [p["metadata"]["name"] for p in box.job_pods("train")]
    first = members(box)[0]["cluster"]["id"]
    box.runpod_sim.fail_instance(members(box)[0]["id"])
    crash_in(box, "after-cluster-deleting")
    box.tick()
    box.tick()
    old = [box.pod(name) or {} for name in names]
    assert [p["status"]["reason"] for p in old] == ["ClusterMemberFailed"] * 2
    [delete] = cluster_deletes(box)
    assert delete.path == f"/v2/clusters/{first}"
    assert first not in box.runpod_sim.clusters


def test_a_delete_a_crash_kept_from_runpod_goes_at_once(box: Sandbox) -> None:
    """The Job is deleted and the process dies between the cluster's `deleting` row and
    its DELETE: the next tick sends it (only a DELETE RunPod answered pauses the next)."""
    import kubernetes

    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    batch = kubernetes.client.BatchV1Api(box.kube_sim.api_client())
    batch.delete_namespaced_job("train", "default", propagation_policy="Background")
    crash_in(box, "after-cluster-deleting")
    box.tick()
    assert [r.path for r in cluster_deletes(box)] == [f"/v2/clusters/{cluster_id}"]
    box.tick()
    assert box.runpod_sim.clusters == {} and box.job_pods("train") == []
