"""Crash safety end to end (docs/architecture.md §4): a create that succeeds but answers
500, listing lag, a crash between the intent row and the create, a crash between the
create and the id write, a crash before a delete is recorded, and a deleted database.
Each converges within two further ticks to exactly one instance per live pod and none
for dead pods."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.core.mapping import MappingState
from reconciler.core.reasons import PodReason
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.tick import crashpoints


def crash() -> None:
    raise crashpoints.SimulatedCrash()


def instances_by_pod(box: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = {}
    for instance in box.owned_instances():
        uid = instance["env"]["RUNPOD_RECONCILER_POD_UID"]
        counts[uid] = counts.get(uid, 0) + 1
    return counts


def assert_converged(box: Sandbox, live: list[str]) -> None:
    uids = {(box.pod(name) or {}).get("metadata", {}).get("uid") for name in live}
    assert instances_by_pod(box) == {uid: 1 for uid in uids}


def creates(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if r.method == "POST" and r.path == "/v2/pods")


def test_create_that_answers_500_is_adopted_not_duplicated(box: Sandbox) -> None:
    box.runpod_sim.faults.create_then_fail(1, status=500)
    box.add_pod("a")
    report = box.tick()
    assert report.failed["Create"] == 1
    box.tick()
    box.tick()
    assert_converged(box, ["a"])
    assert creates(box) == 1


def test_listing_lag_does_not_cause_a_second_create(box: Sandbox) -> None:
    box.runpod_sim.account.set_listing_lag(20)
    box.add_pod("a")
    box.tick()
    box.advance(5)
    box.tick()  # the new instance is not listed yet
    box.advance(20)
    box.tick()
    assert_converged(box, ["a"])
    assert creates(box) == 1


@pytest.mark.parametrize("point", ["after-intent", "after-create", "after-id-write"])
def test_crash_during_create_converges_to_one_instance(box: Sandbox, point: str) -> None:
    box.add_pod("a")
    crashpoints.arm(f"{point}:1", die=crash)
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    made = 0 if point == "after-intent" else 1  # the crash came before or after the POST
    assert creates(box) == made
    box.restart()
    box.tick()  # within the grace: the create is in doubt, or its instance adopted
    assert creates(box) == made
    box.advance(box.settings.timing.create_grace_time + 1)
    box.tick()
    box.tick()
    assert_converged(box, ["a"])
    assert creates(box) == 1


def test_what_is_committed_when_a_create_or_terminate_crashes(box: Sandbox) -> None:
    """The rows the protocol needs durable before a call are committed before it (the
    intent and its open journal entry before the POST, the terminating row before the
    DELETE); what records a call's answer is committed later with the tick's other
    writes, and a crash loses it (the next tick adopts or re-observes)."""
    box.add_pod("a")
    crashpoints.arm("after-intent:1", die=crash)
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    [row] = box.store.load_rows()
    assert row.state is MappingState.CREATING and row.attempt_id and creates(box) == 0
    [entry] = [e for e in box.store.journal() if e.kind == "create"]
    assert entry.finished_at is None  # a call the crash interrupted, as the journal says

    box.restart()
    box.advance(box.settings.timing.create_grace_time + 1)
    crashpoints.arm("after-id-write:1", die=crash)
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    [row] = box.store.load_rows()
    assert creates(box) == 1 and row.instance_id is None  # the id was not committed yet
    box.restart()
    box.tick()  # adopted by its tags
    [row] = box.store.load_rows()
    assert row.state is MappingState.RUNNING and row.instance_id

    box.kube_sim.delete_pod("default", "a")
    crashpoints.arm("after-terminating:1", die=crash)
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    [row] = box.store.load_rows()
    assert row.state is MappingState.TERMINATING and row.ended_at is not None
    assert len(box.owned_instances()) == 1  # the DELETE was not sent


@pytest.mark.parametrize("point", ["after-terminating", "after-delete"])
def test_crash_during_terminate_still_removes_the_instance_and_pod(
    box: Sandbox, point: str
) -> None:
    box.add_pod("a")
    box.tick()
    box.kube_sim.delete_pod("default", "a")
    crashpoints.arm(f"{point}:1", die=crash)
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    box.restart()
    box.tick()
    box.tick()
    assert box.owned_instances() == [] and box.pod("a") is None


def test_crash_after_status_patch_and_finalize_converge(box: Sandbox) -> None:
    box.add_pod("a")
    box.tick()
    box.advance(30)
    crashpoints.arm("after-status-patch:1", die=crash)
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    box.restart()
    box.tick()
    assert (box.pod("a") or {})["status"]["phase"] == "Running"
    box.kube_sim.delete_pod("default", "a")
    box.tick()
    crashpoints.arm("after-finalize:1", die=crash)
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    box.restart()
    box.tick()
    assert box.pod("a") is None and box.owned_instances() == []


def test_deleted_database_is_rebuilt_without_creating_twice(box: Sandbox) -> None:
    for name in ("a", "b"):
        box.add_pod(name)
    box.tick()
    box.advance(30)
    box.tick()
    box.kube_sim.delete_pod("default", "b")
    for suffix in ("", "-wal", "-shm"):
        Path(str(box.workdir / "reconciler.db") + suffix).unlink(missing_ok=True)
    box.restart()
    box.tick()
    box.tick()
    assert_converged(box, ["a"])
    assert box.pod("b") is None
    assert creates(box) == 2
    rows = box.store.load_rows()
    assert any(r.name == "a" and r.instance_id for r in rows)


def test_duplicate_instances_heal_in_one_tick_once_past_the_create_grace(box: Sandbox) -> None:
    box.add_pod("a")
    box.tick()
    pod = box.pod("a") or {}
    box.runpod_sim.add_instance(
        "dup",
        env={
            "RUNPOD_RECONCILER_OWNER": box.settings.owner_id,
            "RUNPOD_RECONCILER_POD_UID": pod["metadata"]["uid"],
        },
    )
    box.tick()  # young: it may be another writer's create, not yet recorded
    assert len(box.owned_instances()) == 2
    box.advance(box.settings.timing.create_grace_time)
    box.tick()
    assert_converged(box, ["a"])


def test_foreign_instances_are_never_touched(box: Sandbox) -> None:
    foreign = box.runpod_sim.add_foreign_instance("someone-elses-training")
    box.add_pod("a")
    for _ in range(3):
        box.tick()
        box.advance(box.settings.timing.orphan_grace_time + 1)
    assert foreign in box.runpod_sim.instances
    touched = [r for r in box.runpod_sim.requests if foreign in r.path]
    assert touched == []


def test_listing_lag_longer_than_the_grace_does_not_fail_a_healthy_pod(box: Sandbox) -> None:
    box.runpod_sim.account.set_listing_lag(box.settings.timing.create_grace_time * 4)
    box.add_pod("a")
    box.tick()
    box.advance(box.settings.timing.create_grace_time * 2)
    box.tick()  # not listed yet and past the grace: a GET proves it exists
    box.tick()
    assert (box.pod("a") or {})["status"].get("phase") != "Failed"
    assert creates(box) == 1
    box.runpod_sim.vanish(next(iter(box.runpod_sim.instances)))
    box.tick()  # now the GET answers 404: really lost
    assert (box.pod("a") or {})["status"]["reason"] == PodReason.INSTANCE_LOST
