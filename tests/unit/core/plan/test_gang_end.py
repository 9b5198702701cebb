"""How a gang ends, its pure rules (`core.plan.gang_end`): which gangs' rank 0 is due a
read (never with an interval of 0, not again within the interval, once more at the
deadline or when a member ended or vanished, whatever rank 0's state, until its failed
last reads are spent, else only a running rank 0 of a batch gang, only a live gang),
when a member vanished, and when a DELETE
goes again (at once when RunPod never answered it, not within a minute of an answer);
and which indexes a Job completed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.core.actions import DeleteCluster
from reconciler.core.cluster_row import ClusterRow, ClusterState
from reconciler.core.config import Settings
from reconciler.core.contract import STOP_ON_EXIT_ENV
from reconciler.core.domain import Instance, InstanceStatus
from reconciler.core.plan import gang_end
from reconciler.core.plan.observation import Observation
from reconciler.core.plan.situation import Situation
from reconciler.core.resources.clusters import MAX_PODS, completed_indexes

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
GANG = "job-uid/0123456789ab"


def member(rank: int, status: InstanceStatus = InstanceStatus.RUNNING) -> Instance:
    env = {STOP_ON_EXIT_ENV: "nonce"}
    return Instance(f"m{rank}", "train", status, env=env, cluster_id="c1", rank=rank)


def row(**changes: object) -> ClusterRow:
    base = ClusterRow(GANG, "job-uid", "default", "train", ClusterState.RUNNING, NOW, NOW)
    return base.changed(cluster_id="c1", **changes)


def pod(deadline: int | None = None) -> dict[str, object]:
    spec = {} if deadline is None else {"activeDeadlineSeconds": deadline}
    started = (NOW - timedelta(seconds=100)).isoformat()
    return {"metadata": {"name": "p", "uid": "u"}, "spec": spec, "status": {"startTime": started}}


def due(rows: dict[str, ClusterRow], interval: float = 60, **kw: object) -> dict:
    members = kw.get("members") or [member(1), member(0)]
    live = kw.get("live") or {GANG: [pod()]}
    return gang_end.due_reads({GANG: members}, rows, live, interval, NOW)  # type: ignore[arg-type]


def test_rank_0_is_read_by_rank_not_by_list_order() -> None:
    assert due({}) == {GANG: ("m0", "nonce")}


def test_an_interval_of_0_reads_nothing() -> None:
    assert due({}, interval=0) == {}


def test_a_recent_read_is_not_repeated_until_the_interval_passed() -> None:
    assert due({GANG: row(result_checked_at=NOW - timedelta(seconds=59))}) == {}
    assert due({GANG: row(result_checked_at=NOW - timedelta(seconds=60))}) != {}


def test_at_the_deadline_rank_0_is_read_once_more() -> None:
    recent = {GANG: row(result_checked_at=NOW - timedelta(seconds=10))}
    assert due(recent, live={GANG: [pod(deadline=90)]}) == {GANG: ("m0", "nonce")}
    assert due(recent, live={GANG: [pod(deadline=200)]}) == {}


def test_only_a_running_batch_rank_0_of_a_live_gang_is_read() -> None:
    assert due({}, members=[member(0, InstanceStatus.STARTING), member(1)]) == {}
    plain = Instance("m0", "train", InstanceStatus.RUNNING, cluster_id="c1", rank=0)
    assert due({}, members=[plain, member(1)]) == {}
    assert due({}, live={"other/gang": [pod()]}) == {}
    assert due({GANG: row(state=ClusterState.DELETING)}) == {}


def test_a_gang_about_to_end_reads_rank_0_once_more_whatever_its_state() -> None:
    """A member that ended fails the gang: rank 0 is read first (it may have exited 0
    just before), even within the interval and when its own host failed after its exit,
    until its failed last reads used up the bound."""
    recent = row(result_checked_at=NOW - timedelta(seconds=10))
    for members in (
        [member(0), member(1, InstanceStatus.ERROR)],
        [member(0, InstanceStatus.ERROR), member(1)],
    ):
        assert due({GANG: recent}, members=members) == {GANG: ("m0", "nonce")}
    spent = recent.changed(unread_ends=gang_end.LAST_READ_TRIES)
    assert due({GANG: spent}, members=[member(0), member(1, InstanceStatus.ERROR)]) == {}
    gone = recent.changed(pod_count=2)  # a member the cluster had is no longer listed
    assert due({GANG: gone}, members=[member(0)]) == {GANG: ("m0", "nonce")}


def test_a_member_that_vanished_ends_the_gang() -> None:
    listed = [member(0), member(1)]
    assert gang_end.member_ended(listed, row(pod_count=2)) is None
    assert gang_end.member_ended([member(0)], row(pod_count=2)) == (
        "the member of rank 1 of cluster c1 is gone"
    )
    provisioning = [member(0), Instance("m1", "train", InstanceStatus.RUNNING, cluster_id="c1")]
    assert gang_end.member_ended(provisioning, row(pod_count=3)) is None


def test_a_delete_goes_again_at_once_unless_runpod_answered_it_lately() -> None:
    t = Situation(Observation([], [], []), Settings(), NOW)
    decided = row(state=ClusterState.DELETING, updated_at=NOW - timedelta(seconds=5))
    assert isinstance(gang_end.delete(t, "c1", decided, "x", ())[0], DeleteCluster)
    answered = decided.changed(delete_answered_at=NOW - timedelta(seconds=5))
    assert gang_end.delete(t, "c1", answered, "x", ()) == []
    later = decided.changed(delete_answered_at=NOW - timedelta(seconds=61))
    assert len(gang_end.delete(t, "c1", later, "x", ())) == 1


def test_completed_indexes_read_as_the_job_controller_writes_them() -> None:
    def done(text: object) -> frozenset[int]:
        return completed_indexes({"metadata": {"name": "j"}, "status": {"completedIndexes": text}})

    assert done("1,3-5,7") == {1, 3, 4, 5, 7}
    assert done("") == done(None) == frozenset()
    assert done("0-x,2") == {2}  # a part that is no interval is skipped
    assert max(done("0-100000000")) == MAX_PODS  # never past a gang's largest size
