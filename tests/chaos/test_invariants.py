"""Every invariant the chaos campaign checks can fail: each is fed a history that breaks
it (a check that cannot fail proves nothing). Fast: pure functions, plus one real
subprocess for a hung tick."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reconciler.core.resources.volume_objects import volume_name
from reconciler.sim.runpod.gateway import REQUEST_LOG_LIMIT
from tests.chaos.invariants import (
    action_requests,
    duplicates,
    foreign_violations,
    foreign_volume_violations,
    hostile_namespace_violations,
    instances_made,
    journal_violations,
    list_times,
    orphan_violations,
    outside,
    request_log_violations,
    reruns,
    steady_violations,
    tick_violations,
    volumes_left_billing,
    volumes_made_twice,
)
from tests.chaos.ticks import JournalRow, Reconciler, TickPlan, TickResult
from tests.chaos.world import SimHost, Snapshot

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
GRACE = 1.0


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def create(uid: str, seconds: float, made: str | None, status: int = 201, lag: float = 0) -> Any:
    return {
        "method": "POST",
        "path": "/v2/pods",
        "status": status,
        "body": {"env": {"RUNPOD_RECONCILER_POD_UID": uid}},
        "at": at(seconds),
        "created": made,
        "listed_from": at(seconds + lag) if made and lag else None,
    }


def listed(seconds: float) -> Any:
    return {"method": "GET", "path": "/v2/pods", "status": 200, "body": None, "at": at(seconds)}


# --- no unexplained duplicate -----------------------------------------------------------


def test_every_instance_a_create_made_counts_even_answered_5xx_or_never_seen() -> None:
    log = [
        create("u1", 0, "i1", status=502),
        create("u1", 1, None, status=500),  # refused before making anything
        create("u1", 2, "i2"),
        create("u2", 3, None, status=400),
    ]
    made = instances_made(log)
    assert {uid: [m.instance_id for m in group] for uid, group in made.items()} == {
        "u1": ["i1", "i2"]
    }


def test_a_second_instance_without_a_lag_is_unexplained() -> None:
    log = [create("u1", 0, "i1"), listed(5), create("u1", 6, "i2")]
    unexplained, explained = duplicates(instances_made(log), list_times(log), GRACE)
    assert len(unexplained) == 1 and explained == []


def test_a_lag_explains_only_an_in_doubt_create_it_hid_past_the_grace() -> None:
    in_doubt = [create("u1", 0, "i1", status=500, lag=10), listed(4), create("u1", 5, "i2")]
    unexplained, explained = duplicates(instances_made(in_doubt), list_times(in_doubt), GRACE)
    assert unexplained == [] and len(explained) == 1
    # The answer arrived (201): the writer knew the id, a lag is no excuse (a dead
    # writer's successor must hold its creates).
    answered = [create("u1", 0, "i1", lag=10), listed(4), create("u1", 5, "i2")]
    assert duplicates(instances_made(answered), list_times(answered), GRACE)[0]
    # The list before the second create showed the first: not hidden.
    shown = [create("u1", 0, "i1", status=500, lag=3), listed(4), create("u1", 5, "i2")]
    assert duplicates(instances_made(shown), list_times(shown), GRACE)[0]
    # Within the create grace: the writer did not wait for the list.
    hasty = [create("u1", 0, "i1", status=500, lag=10), listed(0.5), create("u1", 0.6, "i2")]
    assert duplicates(instances_made(hasty), list_times(hasty), GRACE)[0]


# --- finished work never re-runs --------------------------------------------------------


def rerun_lines(log: list[Any], ended: dict[str, float], on: dict[str, str]) -> tuple[int, int]:
    """(unexplained, explained) reruns of `log`, the work ended `ended` seconds in."""
    when = {uid: T0 + timedelta(seconds=s) for uid, s in ended.items()}
    unexplained, explained = reruns(instances_made(log), when, list_times(log), GRACE, on)
    return len(unexplained), len(explained)


def test_an_instance_made_after_the_work_ended_is_a_rerun() -> None:
    log = [create("u1", 0, "i1"), create("u1", 9, "i2"), create("u2", 1, "i3")]
    assert rerun_lines(log, {"u1": 5, "u2": 5}, {"u1": "i1", "u2": "i3"}) == (1, 0)
    # Made in the very interval the pod ended, after it ended: still a rerun.
    same_tick = [create("u1", 0, "i1"), create("u1", 5.1, "i2")]
    assert rerun_lines(same_tick, {"u1": 5}, {"u1": "i1"}) == (1, 0)


def test_a_rerun_of_an_in_doubt_create_the_list_hid_past_the_grace_is_explained() -> None:
    """The instance whose work ended was made by a create answered 5xx that no list
    showed yet: the writer could not know it, and tried the create again after its grace
    (docs/architecture.md §4), as `duplicates` explains the second instance."""
    hidden = [create("u1", 0, "i1", status=500, lag=10), listed(4), create("u1", 5, "i2")]
    assert rerun_lines(hidden, {"u1": 2}, {"u1": "i1"}) == (0, 1)
    # Not the ended instance's create tried again: the pod was seen finished first, or
    # the work ended on another instance.
    assert rerun_lines(hidden, {"u1": 2}, {}) == (1, 0)
    assert rerun_lines(hidden, {"u1": 2}, {"u1": "i0"}) == (1, 0)
    # The writer knew of the instance (answered, or listed), or did not wait its grace.
    answered = [create("u1", 0, "i1", lag=10), listed(4), create("u1", 5, "i2")]
    shown = [create("u1", 0, "i1", status=500, lag=3), listed(4), create("u1", 5, "i2")]
    hasty = [create("u1", 0, "i1", status=500, lag=10), listed(0.5), create("u1", 0.6, "i2")]
    for log in (answered, shown, hasty):
        assert rerun_lines(log, {"u1": 0.2}, {"u1": "i1"}) == (1, 0)
    # Only the create right after the ended instance's: a third is a rerun.
    third = [*hidden, listed(12), create("u1", 13, "i3")]
    assert rerun_lines(third, {"u1": 2}, {"u1": "i1"}) == (1, 1)


# --- ticks, steadiness, orphans, convergence -------------------------------------------


def result(returncode: int, **kw: Any) -> TickResult:
    return TickResult(TickPlan(), returncode, 1.0, kw.pop("report", {"tick": 1}), **kw)


def test_a_hung_tick_a_lone_refusal_and_a_silent_exit_fail_the_run() -> None:
    assert tick_violations(result(-9, hung=True), contended=False)
    assert not result(-9, hung=True).killed  # a hang is no kill
    assert tick_violations(result(1, refused=True), contended=False)
    assert not tick_violations(result(1, refused=True), contended=True)
    assert tick_violations(result(2), contended=False)
    assert tick_violations(result(0, report=None), contended=False)
    assert not tick_violations(result(0), contended=False)
    assert not tick_violations(TickResult(TickPlan(kill_after=1), -9, 1, None), False)


def test_a_hostile_namespace_must_fail_no_tick() -> None:
    assert hostile_namespace_violations(result(1, report=None))
    caps_error = {"errors": ["saving namespace caps: Python int too large to convert"]}
    assert hostile_namespace_violations(result(0, report=caps_error))
    assert not hostile_namespace_violations(result(0))
    assert not hostile_namespace_violations(result(137, report=None))  # died as armed


def test_a_tick_past_its_timeout_is_hung(tmp_path: Path) -> None:
    class Sleeper(Reconciler):
        def command(self) -> list[str]:
            return [sys.executable, "-c", "import time; time.sleep(60)"]

    sleeper = Sleeper(SimHost(tmp_path), tmp_path, "n", "c", tick_timeout=0.5)
    hung = sleeper.tick(TickPlan())
    assert hung.hung and hung.died and not hung.killed
    assert tick_violations(hung, contended=False)


def test_plans_after_convergence_must_turn_and_stay_empty() -> None:
    assert not steady_violations([{"SaveRow": 1}, {}, {}])
    assert steady_violations([{"SaveRow": 1}, {"SaveRow": 1}, {"SaveRow": 1}])
    assert steady_violations([{}, {"Create": 1}, {}])


def test_orphans_that_outlive_the_bound_are_caught() -> None:
    assert not orphan_violations(2, 4, [])
    assert orphan_violations(5, 4, [])
    assert orphan_violations(None, 4, ["i1"])


def test_an_orphan_a_duplicate_or_a_pod_without_instance_is_unconverged() -> None:
    owner = "c/n"
    pod = {
        "metadata": {"uid": "u1", "name": "a"},
        "spec": {"nodeName": "n"},
        "status": {"phase": "Running"},
    }

    def instance(iid: str, uid: str) -> Any:
        tags = {"RUNPOD_RECONCILER_OWNER": owner, "RUNPOD_RECONCILER_POD_UID": uid}
        return {"id": iid, "status": "RUNNING", "env": tags, "createdAt": at(0)}

    assert Snapshot(owner, "n", {"u1": pod}, [instance("i1", "u1")]).unconverged() == []
    assert Snapshot(owner, "n", {"u1": pod}, []).unconverged()
    assert Snapshot(owner, "n", {}, [instance("i1", "u1")]).unconverged()
    both = [instance("i1", "u1"), instance("i2", "u1")]
    assert Snapshot(owner, "n", {"u1": pod}, both).unconverged()
    # Only a pod that waits for a person (a look-alike named like its instance) may
    # stay without one.
    waiting = {"state": {"waiting": {"reason": "UnownedLookalike"}}}
    blocked = {**pod, "status": {"phase": "Pending", "containerStatuses": [waiting]}}
    assert Snapshot(owner, "n", {"u1": blocked}, []).unconverged() == []
    pending = {**pod, "status": {"phase": "Pending"}}
    assert Snapshot(owner, "n", {"u1": pending}, []).unconverged()


def test_a_stop_instead_of_a_delete_is_caught() -> None:
    stop = {"method": "POST", "path": "/v2/pods/i1/action", "status": 200, "body": {}}
    assert action_requests([stop])
    assert not action_requests([{"method": "DELETE", "path": "/v2/pods/i1", "body": None}])


# --- foreign instances and the journal --------------------------------------------------


def test_a_delete_of_a_foreign_instance_is_caught() -> None:
    snap = Snapshot("c/n", "n", {}, [{"id": "f1", "env": {}}])
    log = [{"method": "DELETE", "path": "/v2/pods/f1", "status": 204, "body": None}]
    assert foreign_violations(log, {"f1"}, snap)
    assert foreign_violations([], {"f1", "f2"}, snap) == ["foreign instance f2 is gone"]


def test_a_side_effect_without_a_journal_row_is_caught() -> None:
    made = create("u1", 0, "i1")
    row = JournalRow(0, 1, 1, False, "create", "u1", None, False, None)
    assert journal_violations([made], [], [], "ns", {})
    assert not journal_violations([made], [], [row], "ns", {})
    patch = ["PATCH", "/api/v1/namespaces/ns/pods/a/status", "", 200]
    assert journal_violations([], [patch], [], "ns", {"a": "u1"})


def test_only_kubernetes_calls_of_a_tick_that_died_may_lack_a_journal_row() -> None:
    before = ["PATCH", "/api/v1/namespaces/ns/pods/a/status", "", 200]
    died = ["DELETE", "/api/v1/namespaces/ns/pods/b", "", 200]
    kube = outside([before, died], [(1, 2)])
    assert kube == [before]
    names = {"a": "u1", "b": "u2"}
    assert journal_violations([create("u1", 0, "i1")], kube, [], "ns", names) == [
        "1 x create of u1 in the simulator log, 0 journal rows",
        "1 x patch-status of u1 in the simulator log, 0 journal rows",
    ]


def test_a_row_left_open_by_a_finished_tick_is_caught() -> None:
    row = JournalRow(0, 1, 1, True, "terminate", None, "i1", False, None)
    assert journal_violations([], [], [row], "ns", {})


def test_open_rows_of_one_tick_are_counted_per_database() -> None:
    first = JournalRow(0, 1, 1, False, "create", "u1", None, False, None)
    again = JournalRow(1, 1, 1, False, "create", "u2", None, False, None)
    assert not journal_violations([], [], [first, again], "ns", {})
    assert journal_violations(
        [], [], [first, JournalRow(0, 2, 1, False, "terminate", None, "i1", False, None)], "ns", {}
    )


# --- network volumes --------------------------------------------------------------------
# The request-log checks read RunPod's log over the whole run and see every reconciler
# of the account; the snapshot's own checks see its owner's volumes only.

OWNER = "c/n"
NEIGHBOUR = "c/m"


def volume(vid: str, claim_uid: str, owner: str = OWNER) -> Any:
    return {"id": vid, "name": volume_name(owner, claim_uid), "size": 10}


def claim_object(uid: str, phase: str = "Bound", **annotations: str) -> Any:
    return {
        "metadata": {"uid": uid, "name": f"c-{uid}", "annotations": annotations},
        "spec": {"resources": {"requests": {"storage": "10G"}}},
        "status": {"phase": phase, "capacity": {"storage": "10G"}},
    }


def pv(vid: str, claim_uid: str, reclaim: str = "Delete") -> Any:
    return {
        "metadata": {"name": f"pvc-{claim_uid}"},
        "spec": {
            "csi": {"volumeHandle": vid},
            "claimRef": {"uid": claim_uid},
            "persistentVolumeReclaimPolicy": reclaim,
        },
    }


def storage(claims: list[Any], pvs: list[Any], volumes: list[Any]) -> Snapshot:
    by_uid = {c["metadata"]["uid"]: c for c in claims}
    return Snapshot(OWNER, "n", {}, [], by_uid, pvs, volumes)


def test_two_volumes_for_one_claim_are_caught() -> None:
    one = storage([claim_object("k1")], [pv("v1", "k1")], [volume("v1", "k1")])
    assert one.duplicate_volumes() == [] and one.unconverged() == []
    two = storage([claim_object("k1")], [pv("v1", "k1")], [volume("v1", "k1"), volume("v2", "k1")])
    assert two.duplicate_volumes() and two.unconverged()
    post = {"method": "POST", "path": "/v2/network-volumes", "status": 201}
    name = volume_name(OWNER, "k1")
    made = [{**post, "body": {"name": name}}, {**post, "body": {"name": name}}]
    assert volumes_made_twice(made) == [f"2 volumes made for claim k1: {[name, name]}"]
    assert volumes_made_twice(made[:1]) == []


def test_a_leaked_volume_is_caught_and_a_retained_one_is_not() -> None:
    # Its claim gone, no PV: the gap a claim deleted between the POST and the PV leaves.
    assert storage([], [], [volume("v1", "k1")]).leaked_volumes()
    # Its claim gone, its PV says Delete: convergence must have deleted both.
    assert storage([], [pv("v1", "k1")], [volume("v1", "k1")]).leaked_volumes()
    # Retain: the volume stays with its Released PV.
    assert storage([], [pv("v1", "k1", "Retain")], [volume("v1", "k1")]).leaked_volumes() == []
    # A PV whose claim and volume are both gone is left over too.
    assert storage([], [pv("v1", "k1")], []).leaked_volumes()
    # Someone else's volume is none of ours.
    assert storage([], [], [volume("v1", "k1", owner="other/n")]).leaked_volumes() == []


def test_a_claim_handed_to_the_provisioner_must_be_bound_at_its_size() -> None:
    handed = {
        "volume.kubernetes.io/storage-provisioner": "x",
        "volume.kubernetes.io/selected-node": "n",
    }
    assert storage([claim_object("k1", "Pending", **handed)], [], []).unconverged()
    unhanded = claim_object("k1", "Pending")  # WaitForFirstConsumer, no consumer yet
    assert storage([unhanded], [], []).unconverged() == []
    # Its consumer went before its volume was made: the selection was taken back.
    taken_back = claim_object("k1", "Pending", **{"volume.kubernetes.io/storage-provisioner": "x"})
    assert storage([taken_back], [], []).unconverged() == []
    grown = claim_object("k1")
    grown["spec"]["resources"]["requests"]["storage"] = "20G"
    assert storage([grown], [pv("v1", "k1")], [volume("v1", "k1")]).unconverged()


def test_a_touched_foreign_volume_is_caught() -> None:
    snap = storage([], [], [{"id": "f1", "name": "datasets"}])
    log = [{"method": "DELETE", "path": "/v2/network-volumes/f1", "status": 204}]
    assert foreign_volume_violations(log, {"f1"}, snap)
    assert foreign_volume_violations([], {"f1", "f2"}, snap) == ["foreign volume f2 is gone"]


def test_a_volume_call_without_its_journal_row_is_caught() -> None:
    name = volume_name(OWNER, "k1")
    post = {"method": "POST", "path": "/v2/network-volumes", "status": 201, "body": {"name": name}}
    assert journal_violations([post], [], [], "ns", {})
    row = JournalRow(0, 1, 1, False, "create-network-volume", "k1", None, False, None)
    assert not journal_violations([post], [], [row], "ns", {})
    gone = {"method": "DELETE", "path": "/v2/network-volumes/v1", "status": 204, "body": None}
    assert journal_violations([gone], [], [], "ns", {})


def volume_post(owner: str, claim_uid: str, status: int = 201) -> Any:
    return {
        "method": "POST",
        "path": "/v2/network-volumes",
        "status": status,
        "body": {"name": volume_name(owner, claim_uid), "size": 10, "dataCenterId": "EU-RO-1"},
    }


def test_a_planted_double_volume_create_is_caught_from_the_request_log() -> None:
    """Two virtual nodes, one Immediate claim: each names its volume with its own owner
    digest, so two volumes for one claim have two names. The final snapshot may show one
    (the other deleted since): the request log still shows two 201s for the claim."""
    once = [volume_post(OWNER, "k1"), volume_post(NEIGHBOUR, "k1", 409), volume_post(OWNER, "k2")]
    assert volumes_made_twice(once) == []
    planted = [*once, volume_post(NEIGHBOUR, "k1")]
    [caught] = volumes_made_twice(planted)
    assert caught.startswith("2 volumes made for claim k1")
    assert volume_name(NEIGHBOUR, "k1") in caught


def test_a_volume_left_billing_after_its_claim_is_caught_whoever_made_it() -> None:
    made = [volume_post(OWNER, "k1"), volume_post(NEIGHBOUR, "k2")]
    volumes = [volume("v1", "k1"), volume("v2", "k2", owner=NEIGHBOUR)]
    kept = storage(
        [claim_object("k1"), claim_object("k2")], [pv("v1", "k1"), pv("v2", "k2")], volumes
    )
    assert volumes_left_billing(made, kept) == []
    # The neighbour's volume, its claim gone and its PV saying Delete: it bills on.
    # The snapshot's own view (our owner only) does not see it.
    gone = storage([claim_object("k1")], [pv("v1", "k1"), pv("v2", "k2")], volumes)
    assert gone.leaked_volumes() == []
    [billing] = volumes_left_billing(made, gone)
    assert "v2" in billing and "claim is gone" in billing
    # Retain keeps it with its Released PV.
    retained = storage([claim_object("k1")], [pv("v1", "k1"), pv("v2", "k2", "Retain")], volumes)
    assert volumes_left_billing(made, retained) == []
    # A volume no PV names bills on, claim or not (a duplicate's loser).
    orphaned = storage([claim_object("k1"), claim_object("k2")], [pv("v1", "k1")], volumes)
    assert volumes_left_billing(made, orphaned) == [
        f"volume v2 ({volume_name(NEIGHBOUR, 'k2')}) bills on: no PV, its claim lives"
    ]
    # A volume no POST of ours made (a foreign one) is none of this check's business.
    foreign = storage([], [], [{"id": "f1", "name": "datasets", "size": 10}])
    assert volumes_left_billing(made, foreign) == []


def test_a_neighbours_volumes_are_the_runs_in_the_snapshot() -> None:
    volumes = [volume("v1", "k1"), volume("v2", "k1", owner=NEIGHBOUR)]
    alone = storage([claim_object("k1")], [pv("v1", "k1")], volumes)
    assert alone.duplicate_volumes() == []  # blind to the neighbour's
    claims = {"k1": claim_object("k1")}
    both = Snapshot(OWNER, "n", {}, [], claims, [pv("v1", "k1")], volumes, (NEIGHBOUR,))
    assert both.duplicate_volumes() == ["claim k1 has volumes ['v1', 'v2']"]
    assert both.leaked_volumes()  # v2: no PV names it


def test_a_request_log_that_lost_its_start_is_caught() -> None:
    assert request_log_violations([{}] * (REQUEST_LOG_LIMIT - 1)) == []
    assert request_log_violations([{}] * REQUEST_LOG_LIMIT)
