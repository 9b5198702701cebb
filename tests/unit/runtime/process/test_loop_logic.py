"""The loop mode's pure decisions, on a fake clock: the debouncer that turns bursts of pod
events into one early tick, the leader election's state, the filter that ignores our own
status patches, and the watch's reconnect backoff."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.runtime.process.debounce import Debouncer
from reconciler.runtime.process.leader import Attempt, Change, Election
from reconciler.runtime.process.watch import ChangeFilter, backoff_seconds, may_be_offloaded


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# --- debouncer ----------------------------------------------------------------------


def test_a_burst_of_changes_becomes_one_tick_after_the_delay(clock: FakeClock) -> None:
    debounce = Debouncer(clock, delay=0.5, min_gap=1.0)
    assert debounce.poke() == 0.5
    clock.now += 0.2
    assert debounce.poke() is None  # joins the tick already due
    clock.now += 0.3
    assert debounce.fire() is True
    debounce.started()
    assert debounce.fire() is False  # nothing new since that tick began


def test_an_early_tick_keeps_its_distance_from_the_previous_tick(clock: FakeClock) -> None:
    debounce = Debouncer(clock, delay=0.5, min_gap=1.0)
    debounce.started()
    clock.now += 0.1
    assert debounce.poke() == pytest.approx(0.9)  # 1 s after that tick's start, not 0.5


def test_a_change_during_a_tick_gets_a_tick_after_it(clock: FakeClock) -> None:
    debounce = Debouncer(clock, delay=0.5, min_gap=1.0)
    debounce.started()  # this tick may have listed the pods before the change
    clock.now += 3
    assert debounce.poke() == 0.5
    clock.now += 0.5
    assert debounce.fire() is True


def test_a_periodic_tick_that_started_after_the_change_makes_the_early_one_moot(
    clock: FakeClock,
) -> None:
    debounce = Debouncer(clock, delay=0.5, min_gap=1.0)
    debounce.poke()
    clock.now += 0.1
    debounce.started()  # the periodic tick came first and saw the change
    clock.now += 0.4
    assert debounce.fire() is False
    clock.now += 1
    assert debounce.poke() is not None  # the next change schedules anew


def test_without_any_change_nothing_fires(clock: FakeClock) -> None:
    assert Debouncer(clock).fire() is False


# --- leader election ------------------------------------------------------------------


def test_winning_the_lease_starts_leading_once() -> None:
    election = Election(renew_deadline=10)
    assert election.observe(Attempt.REFUSED, 0) is None
    assert election.observe(Attempt.WON, 1) is Change.STARTED_LEADING
    assert election.observe(Attempt.WON, 4) is None
    assert election.leading


def test_a_leader_rides_out_an_unreachable_api_server_until_the_renew_deadline() -> None:
    election = Election(renew_deadline=10)
    election.observe(Attempt.WON, 0)
    assert election.observe(Attempt.UNREACHABLE, 5) is None
    assert election.observe(Attempt.UNREACHABLE, 9.9) is None
    assert election.leading
    assert election.observe(Attempt.UNREACHABLE, 10) is Change.STOPPED_LEADING
    assert not election.leading


def test_a_leader_refused_its_own_lease_stops_at_once() -> None:
    election = Election(renew_deadline=10)
    election.observe(Attempt.WON, 0)
    assert election.observe(Attempt.REFUSED, 1) is Change.STOPPED_LEADING


def test_a_standby_never_stops_what_it_never_started() -> None:
    election = Election(renew_deadline=10)
    for now in (0, 20, 40):
        assert election.observe(Attempt.UNREACHABLE, now) is None
        assert election.observe(Attempt.REFUSED, now + 1) is None


# --- watch ------------------------------------------------------------------------------


def pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "uid": "u1", "resourceVersion": "1"},
        "spec": {"nodeName": "virtual-runpod"},
        "status": status,
    }


def test_our_own_status_patches_do_not_count_as_changes() -> None:
    changes = ChangeFilter()
    assert changes.matters("ADDED", pod(phase="Pending"))
    patched = pod(phase="Running")
    patched["metadata"]["resourceVersion"] = "2"
    assert not changes.matters("MODIFIED", patched)


def test_deletion_and_spec_or_metadata_changes_count() -> None:
    changes = ChangeFilter()
    changes.matters("ADDED", pod())
    deleting = pod()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert changes.matters("MODIFIED", deleting)
    assert changes.matters("DELETED", deleting)
    assert not changes.matters("BOOKMARK", deleting)


def test_a_pod_first_seen_modified_counts() -> None:
    assert ChangeFilter().matters("MODIFIED", pod(phase="Running"))


def test_the_scheduler_giving_up_on_a_pod_counts() -> None:
    changes = ChangeFilter(may_be_offloaded)
    waiting = pod()
    waiting["metadata"]["annotations"] = {"runpod.io/managed": "true"}
    assert changes.matters("ADDED", waiting)
    unschedulable = copy.deepcopy(waiting)
    unschedulable["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    ]
    assert changes.matters("MODIFIED", unschedulable)
    unschedulable["status"]["conditions"][0]["message"] = "0/4 nodes are available"
    assert not changes.matters("MODIFIED", unschedulable)


def test_pending_pods_count_only_when_they_may_be_offloaded() -> None:
    changes = ChangeFilter(may_be_offloaded)
    plain = pod()
    assert not changes.matters("ADDED", plain)
    assert not changes.matters("DELETED", plain)
    asking = copy.deepcopy(plain)
    asking["metadata"]["annotations"] = {"runpod.io/offload": "true"}
    assert changes.matters("ADDED", asking)
    job_pod = copy.deepcopy(plain)
    job_pod["metadata"]["uid"] = "u2"
    job_pod["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train"}]
    assert changes.matters("ADDED", job_pod)
    assert changes.matters("DELETED", asking)  # bound or gone: the tick should look


def test_reconnect_backoff_doubles_up_to_a_cap_with_jitter() -> None:
    assert [backoff_seconds(n, lambda: 1.0) for n in (1, 2, 3, 4, 10)] == [1, 2, 4, 8, 30]
    assert backoff_seconds(3, lambda: 0.0) == 2  # never less than half
