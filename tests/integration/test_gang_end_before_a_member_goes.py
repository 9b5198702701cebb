"""Found by chaos campaign seed 5103: a gang's rank 0 exits 0 and, before a tick has read
that end, a user deletes one of the gang's pods. The next tick failed the gang
(ClusterMemberFailed: "a pod of its gang ended or went") and deleted the cluster without
reading rank 0's end; the Job (backoffLimit 2) made new pods and a second cluster ran
the finished training again. Now a gang whose pods changed has rank 0 read one last
time. A kubelet reports a container that exited 0 before its pod's
deletion as Succeeded: the gang's end is rank 0's, and must be read before a member's
going fails the gang (the instance rule: the end is on the pods before the resource goes).

Found by the campaign in CI (seed 11000): the Job replaces the deleted pod at once, and
the replacement waited Pending (ClusterForming) forever for an index that had completed.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.plan import gang_end
from reconciler.demo.sandbox import Sandbox

from .test_gang_end_on_pods import cluster_posts, job_conditions, rank_0, settle


def running_retried_gang(box: Sandbox) -> None:
    """As the campaign's gangs: an Indexed Job that may be tried again."""
    box.add_indexed_job("train", 2, backoff_limit=2)
    box.tick()
    box.advance(30)
    box.tick()
    assert [p["status"]["phase"] for p in box.job_pods("train")] == ["Running", "Running"]


def shown(pods: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (p["metadata"]["name"], p["status"].get("phase"), p["status"].get("reason")) for p in pods
    ]


@pytest.mark.parametrize("index", [0, 1])
def test_a_member_deleted_after_rank_0_exited_0_keeps_the_success(box: Sandbox, index: int) -> None:
    running_retried_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(5)  # no tick between the exit and the user's delete
    pod = sorted(p["metadata"]["name"] for p in box.job_pods("train"))[index]
    box.kube_sim.delete_pod("default", pod, 30)  # a user's delete, graceful
    settle(box)
    pods = box.job_pods("train")
    assert cluster_posts(box) == 1, shown(pods)  # the training never ran again
    assert "ClusterMemberFailed" not in [p["status"].get("reason") for p in pods], shown(pods)
    # The Job replaced the deleted pod at once (a deleted pod that did not succeed counts
    # as failed): that pod ends with its gang too, and the Job completes.
    assert [p["status"].get("phase") for p in pods] == ["Succeeded", "Succeeded"], shown(pods)
    assert "Complete" in job_conditions(box), shown(pods)


@pytest.mark.parametrize("status", [503, 429])
def test_a_failed_last_read_leaves_the_gang_unjudged(box: Sandbox, status: int) -> None:
    """The one last read of rank 0 fails: that says nothing of the gang's end, so the
    gang is not failed on it; a later read finds the success."""
    running_retried_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(5)
    pod = sorted(p["metadata"]["name"] for p in box.job_pods("train"))[1]
    box.kube_sim.delete_pod("default", pod, 30)
    box.runpod_sim.faults.inject("GET", "/v2/pods/*/logs", status, count=50)
    box.tick()
    pods = box.job_pods("train")
    assert "ClusterMemberFailed" not in [p["status"].get("reason") for p in pods], shown(pods)
    assert box.runpod_sim.clusters, "the cluster went before its gang's end was known"
    box.runpod_sim.faults.reset()
    settle(box)
    pods = box.job_pods("train")
    assert cluster_posts(box) == 1, shown(pods)
    assert [p["status"].get("phase") for p in pods] == ["Succeeded", "Succeeded"], shown(pods)


def test_a_read_failing_past_the_bound_no_longer_holds_the_cluster(box: Sandbox) -> None:
    """The hold on an unknown end lasts LAST_READ_TRIES failed reads, one a tick; after
    that the gang is judged on what is known, and its cluster stops billing."""
    running_retried_gang(box)
    pod = sorted(p["metadata"]["name"] for p in box.job_pods("train"))[1]
    box.kube_sim.delete_pod("default", pod, 30)
    box.runpod_sim.faults.inject("GET", "/v2/pods/*/logs", 503, count=1000)
    box.tick()
    [held] = box.runpod_sim.clusters
    for _ in range(gang_end.LAST_READ_TRIES):
        box.advance(31)
        box.tick()
    pods = box.job_pods("train")
    assert "ClusterMemberFailed" in [p["status"].get("reason") for p in pods], shown(pods)
    box.advance(box.settings.timing.create_grace_time + 1)
    box.tick()
    assert held not in box.runpod_sim.clusters  # the Job's next gang may have its own


def test_every_member_deleted_after_rank_0_exited_0_keeps_the_success(box: Sandbox) -> None:
    """Both pods deleted before a tick read rank 0's 0: the Job replaces both at once,
    and with no index completed the new pods could form a gang. The read of the old
    cluster says the work is done: they end Succeeded, and no second cluster is made."""
    running_retried_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(5)
    for pod in [p["metadata"]["name"] for p in box.job_pods("train")]:
        box.kube_sim.delete_pod("default", pod, 30)
    settle(box)
    pods = box.job_pods("train")
    assert cluster_posts(box) == 1, shown(pods)
    assert [p["status"].get("phase") for p in pods] == ["Succeeded", "Succeeded"], shown(pods)
    assert "Complete" in job_conditions(box), shown(pods)


def test_every_member_deleted_after_the_success_was_recorded_keeps_it(box: Sandbox) -> None:
    """As above, but a tick read the 0 and recorded it in the cluster's row, while the
    API server refused the pods' patches: the row says the work is done."""
    running_retried_gang(box)
    box.runpod_sim.exit_process(rank_0(box), 0)
    box.advance(box.settings.timing.gang_result_interval + 1)  # rank 0 is due a read
    box.kube_sim.inject_fault("PATCH", "/api/v1/namespaces/*/pods/*/status", 409, 2)
    box.tick()
    [row] = box.store.load_clusters()
    assert row.exit_code == 0  # recorded, the DELETE held back for the pods' end
    assert [p["status"].get("phase") for p in box.job_pods("train")] == ["Running", "Running"]
    for pod in [p["metadata"]["name"] for p in box.job_pods("train")]:
        box.kube_sim.delete_pod("default", pod, 30)
    settle(box)
    pods = box.job_pods("train")
    assert cluster_posts(box) == 1, shown(pods)
    assert [p["status"].get("phase") for p in pods] == ["Succeeded", "Succeeded"], shown(pods)
    assert "Complete" in job_conditions(box), shown(pods)
