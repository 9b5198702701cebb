"""The campaign's Instant Cluster invariants can fail: each is fed a world that
breaks it (a check that cannot fail proves nothing). Pure: no simulator."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.core.contract import GANG_ENV, OWNER_ENV
from tests.chaos.invariants import clusters_made_twice, gang_ends_lost, gangs_rerun
from tests.chaos.world import Snapshot

OWNER = "c/n"


def member(cluster_id: str, gang: str, owner: str = OWNER) -> Any:
    return {
        "id": f"{cluster_id}-m",
        "env": {OWNER_ENV: owner, GANG_ENV: gang},
        "cluster": {"id": cluster_id, "rank": 0},
    }


def gang_pod(job_uid: str, phase: str = "Running") -> Any:
    return {
        "metadata": {
            "uid": f"pod-of-{job_uid}",
            "ownerReferences": [{"kind": "Job", "uid": job_uid}],
        },
        "status": {"phase": phase},
    }


def world(pods: list[Any], members: list[Any]) -> Snapshot:
    return Snapshot(OWNER, "n", {p["metadata"]["uid"]: p for p in pods}, members)


def test_two_clusters_for_one_gang_are_caught() -> None:
    one = world([gang_pod("job1")], [member("c1", "job1/g"), member("c1", "job1/g")])
    assert one.duplicate_clusters() == []
    two = world([gang_pod("job1")], [member("c1", "job1/g"), member("c2", "job1/g")])
    assert two.duplicate_clusters() == ["job1/g"]
    # Two attempts of one Job (a failed gang made again) are two gangs, not a duplicate.
    again = world([gang_pod("job1")], [member("c1", "job1/g"), member("c2", "job1/h")])
    assert again.duplicate_clusters() == []


def test_a_cluster_whose_job_has_no_live_pod_is_caught() -> None:
    assert world([gang_pod("job1")], [member("c1", "job1/g")]).leaked_clusters() == []
    assert world([], [member("c1", "job1/g")]).leaked_clusters() == ["c1"]
    finished = world([gang_pod("job1", "Succeeded")], [member("c1", "job1/g")])
    assert finished.leaked_clusters() == ["c1"]
    # Someone else's cluster is none of ours.
    assert world([], [member("c1", "job1/g", owner="other/n")]).leaked_clusters() == []


def cluster_post(gang: str, status: int = 201, made: bool | None = None) -> Any:
    """A cluster create as RunPod's log has it: `created` names what it made, whatever
    the answer (a 201 made one; a 502 may have)."""
    made = status == 201 if made is None else made
    return {
        "method": "POST",
        "path": "/v2/clusters",
        "status": status,
        "body": {"env": {OWNER_ENV: OWNER, GANG_ENV: gang}},
        "created": f"c-{next(_ids)}" if made else None,
    }


_ids = itertools.count()


def test_a_planted_double_cluster_create_is_caught_from_the_request_log() -> None:
    """The final snapshot may show one cluster (the heal deleted the other): RunPod's
    ledger still shows two clusters made for one gang, a 502 that made one included."""
    once = [cluster_post("job1/g"), cluster_post("job1/g", 400), cluster_post("job1/h")]
    assert clusters_made_twice(once) == []
    twice = [*once, cluster_post("job1/g")]
    assert clusters_made_twice(twice) == ["2 clusters made for gang job1/g"]
    unanswered = [*once, cluster_post("job1/g", 502, made=True)]
    assert clusters_made_twice(unanswered) == ["2 clusters made for gang job1/g"]


def at(seconds: float) -> datetime:
    return datetime(2026, 11, 28, 12, 0, tzinfo=UTC) + timedelta(seconds=seconds)


def made(gang: str, seconds: float, status: int = 201) -> Any:
    return {**cluster_post(gang, status), "at": at(seconds).isoformat()}


def test_a_planted_rerun_of_a_finished_gang_is_caught_from_the_request_log() -> None:
    """Rank 0 exited 0 at t=10; the Job's pods are made again (a lost success), under a
    new gang tag: one cluster per tag, but a second cluster for the Job after its end."""
    history = [made("job1/a", 0), made("job1/b", 5), made("job2/a", 20)]  # b: a retry
    done = {"job1": at(10)}
    assert clusters_made_twice(history) == []
    assert gangs_rerun(history, done) == []
    rerun = [*history, made("job1/c", 30, 400), made("job1/c", 31)]
    assert clusters_made_twice(rerun) == []  # the per-tag count cannot see it
    [caught] = gangs_rerun(rerun, done)
    assert "Job job1 got cluster for gang job1/c" in caught


def test_a_finished_gangs_pod_that_ends_failed_is_caught() -> None:
    pods = {"p1": "job1", "p2": "job1"}
    seen = {"p1": "Succeeded", "p2": "Succeeded"}
    assert gang_ends_lost(pods, seen, world([], [])) == []
    lost = {"p1": "Succeeded", "p2": "Failed (ClusterMemberFailed)"}
    assert gang_ends_lost(pods, lost, world([], [])) == [
        "pod p2 of Job job1 (rank 0 exited 0) ended Failed (ClusterMemberFailed)"
    ]
    # Never seen finished and still there at the end: its end was never written.
    running = gang_pod("job1")
    running["metadata"]["uid"] = "p2"
    assert gang_ends_lost(pods, {"p1": "Succeeded"}, world([running], [])) == [
        "pod p2 of Job job1 (rank 0 exited 0) is still Running"
    ]
