"""How a gang ends, its pure rules (`core.plan.gang_end`): which gangs' rank 0 is due a
read (never with an interval of 0, not again within the interval, once more at the
deadline, only a running rank 0 of a batch gang, only a live gang), and when a DELETE
goes again (at once when RunPod never answered it, not within a minute of an answer);
and which indexes a Job completed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.core.actions import DeleteCluster
from reconciler.core.cluster_record import ClusterRecord, ClusterState
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


def row(**changes: object) -> ClusterRecord:
    base = ClusterRecord(GANG, "job-uid", "default", "train", ClusterState.RUNNING, NOW, NOW)
    return base.changed(cluster_id="c1", **changes)


def pod(deadline: int | None = None) -> dict[str, object]:
    spec = {} if deadline is None else {"activeDeadlineSeconds": deadline}
    started = (NOW - timedelta(seconds=100)).isoformat()
    return {"metadata": {"name": "p", "uid": "u"}, "spec": spec, "status": {"startTime": started}}


def due(rows: dict[str, ClusterRecord], interval: float = 60, **kw: object) -> dict:
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
    assert due({}, members=[member(0), member(1, InstanceStatus.ERROR)]) == {}
    plain = Instance("m0", "train", InstanceStatus.RUNNING, cluster_id="c1", rank=0)
    assert due({}, members=[plain, member(1)]) == {}
    assert due({}, live={"other/gang": [pod()]}) == {}
    assert due({GANG: row(state=ClusterState.DELETING)}) == {}


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
