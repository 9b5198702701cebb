"""What is collected of gangs (`core.plan.gang_collect`): a listed cluster of ours whose
Job has no pod on the node is deleted, but only once older than the orphan grace (a
create's pods may show a moment after its members); a Job with a pod on the node keeps
its cluster; a row no gang needs is forgotten only once no create of it can be in
doubt; a deleted cluster's row goes on RunPod's 404 when no pod of its Job stays."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from reconciler.core.actions import DeleteCluster, DeleteClusterRow
from reconciler.core.cluster_row import ClusterRow, ClusterState
from reconciler.core.config import Settings
from reconciler.core.domain import Instance, InstanceStatus
from reconciler.core.plan.gang_collect import collect
from reconciler.core.plan.observation import Observation
from reconciler.core.plan.situation import Situation
from reconciler.core.reasons import TerminateReason

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
GANG = "job-uid/0123456789ab"
SETTINGS = Settings()  # orphan grace 300 s, create grace 120 s


def tick(gone: frozenset[str] = frozenset()) -> Situation:
    return Situation(replace(Observation([], [], []), clusters_gone=gone), SETTINGS, NOW)


def members(age: float) -> list[Instance]:
    born = NOW - timedelta(seconds=age)
    return [
        Instance(f"m{r}", "train", InstanceStatus.RUNNING, cluster_id="c1", rank=r, created_at=born)
        for r in range(2)
    ]


def row(state: ClusterState = ClusterState.RUNNING, age: float = 0) -> ClusterRow:
    at = NOW - timedelta(seconds=age)
    return ClusterRow(GANG, "job-uid", "ml", "train", state, at, at, cluster_id="c1")


def test_a_cluster_whose_job_left_the_node_is_deleted_after_the_orphan_grace() -> None:
    young = collect(tick(), {GANG: members(299)}, {}, (set(), set()), set())
    assert young == []
    old = collect(tick(), {GANG: members(301)}, {}, (set(), set()), set())
    assert [(type(a), a.cluster_id, a.reason) for a in old] == [  # type: ignore[union-attr]
        (DeleteCluster, "c1", TerminateReason.ORPHAN)
    ]


def test_a_cluster_whose_job_has_a_pod_on_the_node_is_kept() -> None:
    jobs = ({"job-uid"}, {"job-uid"})
    assert collect(tick(), {GANG: members(3600)}, {}, jobs, {GANG}) == []


def test_a_row_no_gang_needs_is_forgotten_once_no_create_of_it_can_be_in_doubt() -> None:
    grace = SETTINGS.timing.create_grace_time + SETTINGS.timing.orphan_grace_time
    creating = row(ClusterState.CREATING, age=grace - 1)
    assert collect(tick(), {}, {GANG: creating}, (set(), set()), set()) == []
    late = row(ClusterState.CREATING, age=grace + 1)
    assert collect(tick(), {}, {GANG: late}, (set(), set()), set()) == [DeleteClusterRow(GANG)]
    current = collect(tick(), {}, {GANG: late}, (set(), set()), {GANG})
    assert current == []


def test_a_deleted_clusters_row_goes_on_its_404_once_no_pod_of_its_job_stays() -> None:
    deleting = {GANG: row(ClusterState.DELETING)}
    assert collect(tick(), {}, deleting, (set(), set()), set()) == []
    gone = collect(tick(frozenset({"c1"})), {}, deleting, (set(), set()), set())
    assert gone == [DeleteClusterRow(GANG)]
    staying = collect(tick(frozenset({"c1"})), {}, deleting, ({"job-uid"}, {"job-uid"}), set())
    assert [type(a).__name__ for a in staying] == ["SaveClusterRow"]
