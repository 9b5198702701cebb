"""The Instant Cluster resource's pure rules (`core.resources.clusters`): a cluster we
delete is no leak; a deleted cluster's 404 forgets its row, or keeps it as `gone` while
a pod of its Job stays (its end is still owed to them), and a `gone` row is no cluster
to read by id; each live gang pod is paired with its member by rank, only within its own
gang's cluster of ours; a member is found by id only with our tags, the row's gang and
the pod's Job, namespace and index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.core.actions import DeleteCluster
from reconciler.core.cluster_row import ClusterRow, ClusterState
from reconciler.core.contract import GANG_ENV, OWNER_ENV
from reconciler.core.domain import Instance, InstanceStatus
from reconciler.core.reasons import TerminateReason
from reconciler.core.resources import clusters

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
OWNER = "owner"
JOB = "job-uid"


def pod(uid: str, index: int, *, job: str = JOB, namespace: str = "default", **meta: Any) -> dict:
    return {
        "metadata": {
            "name": f"train-{index}",
            "namespace": namespace,
            "uid": uid,
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
            "ownerReferences": [{"kind": "Job", "controller": True, "uid": job, "name": "t"}],
            **meta,
        },
        "spec": {},
        "status": {"phase": "Running"},
    }


PODS = [pod("a", 0), pod("b", 1)]
GANG = clusters.gang_key(JOB, PODS)


def member(rank: int, gang: str = GANG, owner: str = OWNER, cluster: str = "c1") -> Instance:
    env = {OWNER_ENV: owner, GANG_ENV: gang}
    return Instance(
        f"m{rank}", "train", InstanceStatus.RUNNING, env=env, cluster_id=cluster, rank=rank
    )


def row(state: ClusterState = ClusterState.DELETING, **changes: Any) -> ClusterRow:
    base = ClusterRow(GANG, JOB, "default", "t", state, NOW, NOW, cluster_id="c1")
    return base.changed(**changes)


def test_a_cluster_we_delete_is_no_leak() -> None:
    old = clusters.UnrunCluster("c1", 2, 1.0, GANG, NOW - timedelta(hours=1))
    assert clusters.leaked([old], 60, NOW) == [old]
    planned = [DeleteCluster("c1", TerminateReason.POD_FAILED, "its Job went")]
    assert clusters.leaked([old], 60, NOW, clusters.deleting([], planned)) == []
    assert clusters.leaked([old], 60, NOW, clusters.deleting([row()], [])) == []
    assert clusters.leaked([old], 60, NOW, clusters.deleting([row(ClusterState.RUNNING)], [])) == [
        old
    ]


def test_a_deleted_clusters_404_forgets_its_row_or_keeps_it_gone_for_its_pods() -> None:
    deleting = row()
    assert clusters.gone_rows([deleting], frozenset({"c1"}), set()) == ([GANG], [])
    forgotten, kept = clusters.gone_rows([deleting], frozenset({"c1"}), {JOB})
    assert forgotten == [] and [r.state for r in kept] == [ClusterState.GONE]
    assert clusters.gone_rows([deleting], frozenset(), {JOB}) == ([], [])  # no 404
    gone = row(ClusterState.GONE)
    assert clusters.gone_rows([gone], frozenset(), {JOB}) == ([], [])
    assert clusters.gone_rows([gone], frozenset(), set()) == ([GANG], [])
    assert gone.changed(exit_code=0).ended  # its pods are still owed the end


def test_deleting_rows_are_read_by_id_until_gone() -> None:
    assert clusters.unlisted([row()], [], [], OWNER) == ["c1"]
    assert clusters.unlisted([row()], [], [member(0)], OWNER) == []  # listed
    assert clusters.unlisted([row(ClusterState.GONE)], [], [], OWNER) == []


def test_each_live_gang_pod_is_paired_with_its_member_by_rank() -> None:
    found = clusters.members_by_pod(PODS, [member(1), member(0)], OWNER)
    assert {uid: [m.id for m in ms] for uid, ms in found.items()} == {"a": ["m0"], "b": ["m1"]}
    assert clusters.members_by_pod(PODS, [member(0, owner="other")], OWNER) == {}
    assert clusters.members_by_pod(PODS, [member(0, gang=f"{JOB}/000000000000")], OWNER) == {}


def test_a_member_is_found_by_id_only_with_our_tags_and_the_pods_job_and_index() -> None:
    running = row(ClusterState.RUNNING)
    listed = [member(0), member(1)]
    assert clusters.member_for(PODS[1], running, listed, OWNER) == member(1)
    assert clusters.member_for(pod("x", 1, job="other"), running, listed, OWNER) is None
    assert clusters.member_for(pod("x", 1, namespace="theirs"), running, listed, OWNER) is None
    assert clusters.member_for(PODS[1], running, [member(1, owner="other")], OWNER) is None
    assert clusters.member_for(PODS[1], running, [member(1, cluster="c2")], OWNER) is None
    assert clusters.member_for(PODS[1], running, [member(1, owner="other")], None) == member(
        1, owner="other"
    )
