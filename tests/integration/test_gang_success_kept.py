"""A gang's success, once rank 0 exited 0, is never lost: before a gang is failed for any
reason (a member failed or vanished, a pod deleted, a deadline), rank 0's result is read,
and a read that fails is tried again on later ticks while the cluster is kept, up to
`5` failed reads (docs/architecture.md §3, "Instant Clusters").

Found on main: rank 0 exited 0, then a member's host failed (or rank 0's own) before the
next result read; the gang was failed (ClusterMemberFailed) with no last read, and the
Job's retry made a second cluster that ran the finished training again. And: rank 0
exited 0, a gang pod was deleted with grace 0 and the last read failed once: the gang
was judged on what was known."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconciler.core.plan import gang_end
from reconciler.demo.sandbox import Sandbox

from .test_gang_end_before_a_member_goes import running_retried_gang, shown
from .test_gang_end_on_pods import cluster_posts, job_conditions, rank_0, settle

LOGS = "/v2/pods/*/logs"


def other_member(box: Sandbox) -> str:
    [member] = [
        m["id"]
        for m in box.runpod_sim.instances.values()
        if "cluster" in m and m["cluster"]["rank"] != 0
    ]
    return member


def completed_once(box: Sandbox) -> None:
    pods = box.job_pods("train")
    assert cluster_posts(box) == 1, shown(pods)  # the training never ran again
    assert [p["status"].get("phase") for p in pods] == ["Succeeded", "Succeeded"], shown(pods)
    assert "Complete" in job_conditions(box), shown(pods)


HOST_FAULTS: dict[str, Callable[[Sandbox], None]] = {
    "a member's host fails": lambda box: box.runpod_sim.fail_instance(other_member(box)),
    "rank 0's host fails": lambda box: box.runpod_sim.fail_instance(rank_0(box)),
    "a member vanishes": lambda box: box.runpod_sim.vanish(other_member(box)),
}


@pytest.mark.parametrize("fault", sorted(HOST_FAULTS))
def test_a_member_ending_after_rank_0_exited_0_keeps_the_success(box: Sandbox, fault: str) -> None:
    running_retried_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(5)  # well within --gang-result-interval: no read due yet
    HOST_FAULTS[fault](box)
    settle(box)
    completed_once(box)


@pytest.mark.parametrize("fault", sorted(HOST_FAULTS))
def test_a_member_ending_while_rank_0_runs_still_fails_the_gang(box: Sandbox, fault: str) -> None:
    """The last read finds no end: the gang fails as before, and its cluster goes."""
    running_retried_gang(box)
    HOST_FAULTS[fault](box)
    box.advance(5)
    box.tick()
    pods = box.job_pods("train")
    assert "ClusterMemberFailed" in [p["status"].get("reason") for p in pods], shown(pods)


@pytest.mark.parametrize("grace", [0, 30])
def test_a_failed_last_read_is_tried_again_after_a_pods_grace(box: Sandbox, grace: int) -> None:
    """Rank 0 exited 0, a pod is deleted, and the reads fail for longer than the pod's
    grace (one tick is enough with grace 0): the gang waits for a read that answers."""
    running_retried_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(5)
    pod = sorted(p["metadata"]["name"] for p in box.job_pods("train"))[1]
    box.kube_sim.delete_pod("default", pod, grace)
    box.runpod_sim.faults.inject("GET", LOGS, 500, count=1000)
    for _ in range(gang_end.LAST_READ_TRIES - 1):
        box.tick()
        box.advance(grace + 1)
    assert box.runpod_sim.clusters, "the cluster went before its gang's end was known"
    box.runpod_sim.faults.reset()
    settle(box)
    completed_once(box)


def test_a_failed_last_read_after_a_member_failed_is_tried_again(box: Sandbox) -> None:
    running_retried_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(5)
    box.runpod_sim.fail_instance(other_member(box))
    box.runpod_sim.faults.inject("GET", LOGS, 503, count=1000)
    for _ in range(gang_end.LAST_READ_TRIES - 1):
        box.tick()
        box.advance(30)
    pods = box.job_pods("train")
    assert "ClusterMemberFailed" not in [p["status"].get("reason") for p in pods], shown(pods)
    box.runpod_sim.faults.reset()
    settle(box)
    completed_once(box)


def test_a_read_that_keeps_failing_ends_the_gang_within_the_bound(box: Sandbox) -> None:
    """The hold is bounded: after LAST_READ_TRIES failed reads the gang is judged on
    what is known, so a log route that never answers cannot keep a cluster billing."""
    running_retried_gang(box)
    [first] = box.runpod_sim.clusters
    box.runpod_sim.fail_instance(other_member(box))
    box.runpod_sim.faults.inject("GET", LOGS, 503, count=1000)
    for _ in range(gang_end.LAST_READ_TRIES + 1):
        box.tick()
        box.advance(30)
    pods = box.job_pods("train")
    assert "ClusterMemberFailed" in [p["status"].get("reason") for p in pods], shown(pods)
    settle(box, 2)
    assert first not in box.runpod_sim.clusters


def test_a_deadline_after_rank_0_exited_0_keeps_the_success(box: Sandbox) -> None:
    """The pods' deadline passes just after rank 0 exited 0, and the read fails once:
    the success is read on the next tick instead of DeadlineExceeded."""
    box.add_indexed_job("train", 2, backoff_limit=2, active_deadline_seconds=120)
    box.tick()
    box.advance(30)
    box.tick()
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(125)  # past the deadline, counted from the pods' start
    box.runpod_sim.faults.inject("GET", LOGS, 503, count=4)  # each attempt of one read
    box.tick()
    box.runpod_sim.faults.reset()
    settle(box)
    completed_once(box)
