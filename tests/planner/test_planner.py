"""The planner's rules, one scenario each: the pod lifecycle, crash recovery (in-doubt
creates, lost state), orphans and duplicates, ownership, budgets, pacing and reasons,
and the mirror key that spares a steady pod the status computation."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from datetime import timedelta
from typing import NoReturn

import pytest

from reconciler.core.actions import (
    Action,
    Adopt,
    Create,
    Event,
    FinalizePod,
    PatchMetadata,
    PatchStatus,
    PodRef,
    SaveRow,
    Terminate,
)
from reconciler.core.config import Settings
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.core.domain import InstanceStatus
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.planner import one_row_per_instance
from reconciler.core.reasons import PodReason, TerminateReason
from reconciler.core.translate import status as pod_status
from tests.planner.world import OWNER, SETTINGS, T0, World, instance, kinds, pod


def test_a_new_pod_gets_one_create_with_an_intent_row() -> None:
    world = World().add(pod("train"))
    [create] = world.plan()
    assert isinstance(create, Create)
    assert create.row.state is MappingState.CREATING and create.row.attempt_id
    first = create.candidates[0]
    assert first.env[OWNER_ENV] == OWNER and first.env[POD_UID_ENV] == "uid-train"
    assert first.gpu_type_id == "NVIDIA GeForce RTX 4090"  # cheapest first


def test_running_instance_is_mirrored_then_the_tick_is_quiet() -> None:
    world = World().add(pod("serve", ports=[22]))
    world.apply(world.plan())
    actions = world.plan()
    # Status and annotations in one request: no separate PatchMetadata, and no Event
    # saying what the status says (the pod started).
    assert kinds(actions) == ["PatchStatus"]
    patch = next(a for a in actions if isinstance(a, PatchStatus))
    assert patch.status["phase"] == "Running"
    assert patch.annotations["runpod.io/pod-id"] == "inst1"
    world.apply(actions)
    # Our patches renewed the pod's resourceVersion: one more tick computes the status,
    # finds it unchanged and only records the new mirror key.
    [save] = world.plan()
    assert isinstance(save, SaveRow) and save.row.mirror_key
    world.apply([save])
    assert world.plan() == []


def _mirrored_world() -> World:
    """A serving pod whose status and annotations already mirror its instance."""
    world = World().add(pod("serve", ports=[22]))
    for _ in range(3):
        world.apply(world.plan())
    assert world.plan() == []
    return world


def test_an_unchanged_mirror_key_skips_the_status_computation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _mirrored_world()

    def computed(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("the status was computed again")

    monkeypatch.setattr(pod_status, "pod_status", computed)
    monkeypatch.setattr(pod_status, "metadata_annotations", computed)
    world.now += timedelta(minutes=5)
    assert world.plan() == []


def test_a_new_resource_version_recomputes_the_status() -> None:
    world = _mirrored_world()
    # Someone updated the image (a mutable field): the pod got a new resourceVersion.
    world.pods["uid-serve"]["spec"]["containers"][0]["image"] = "python:3.12"
    world.touch("uid-serve")
    [patch] = world.plan()
    assert isinstance(patch, PatchStatus)
    assert patch.status["containerStatuses"][0]["image"] == "python:3.12"


def test_a_changed_instance_recomputes_the_status() -> None:
    world = _mirrored_world()
    [running] = world.instances.values()
    world.add(dataclasses.replace(running, status=InstanceStatus.STARTING, runtime=None))
    [patch] = [a for a in world.plan() if isinstance(a, PatchStatus)]
    assert patch.row.last_instance_status == "STARTING"
    assert {c["type"]: c["status"] for c in patch.status["conditions"]}["Ready"] == "False"


def test_a_row_that_noted_an_error_is_cleared_although_the_key_holds() -> None:
    world = _mirrored_world()
    world.rows["uid-serve"] = world.rows["uid-serve"].changed(last_error="patch refused")
    [save] = world.plan()
    assert isinstance(save, SaveRow) and save.row.last_error is None


def test_a_failed_metadata_patch_is_retried() -> None:
    world = World().add(pod("serve", ports=[22]))
    world.apply(world.plan())
    for _ in range(3):  # the status patch carrying the annotations keeps failing
        actions = world.plan()
        [patch] = [a for a in actions if isinstance(a, PatchStatus)]
        assert patch.annotations
        world.apply([a for a in actions if not isinstance(a, PatchStatus)])
    # The status got through without them (someone removed them since): a metadata
    # patch alone writes them again, on this tick and the next ones until it succeeds.
    world.apply([replace(patch, annotations={})])
    for _ in range(2):
        actions = world.plan()
        assert "PatchMetadata" in kinds(actions)
        world.apply([a for a in actions if not isinstance(a, PatchMetadata)])


def test_deleting_a_pod_terminates_then_finalizes() -> None:
    world = World().add(pod("gone", deleting=True, phase="Running"), instance("uid-gone"))
    actions = world.plan()
    assert kinds(actions) == ["Terminate", "Event"]
    world.apply(actions)
    [finalize] = world.plan()
    assert isinstance(finalize, FinalizePod) and finalize.pod.uid == "uid-gone"
    # Only now, the instance gone, the pod gets its terminal phase (written first).
    assert finalize.status is not None and finalize.status["phase"] == "Failed"
    terminated = finalize.status["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == "Error"


def test_a_deleted_batch_pod_that_had_ended_with_zero_succeeds() -> None:
    world = World().add(pod("job", deleting=True, phase="Running", restart_policy="Never"))
    world.rows["uid-job"] = world_row(world, "uid-job", "inst-ended").changed(
        state=MappingState.TERMINATED, exit_code=0
    )
    [finalize] = world.plan()
    assert isinstance(finalize, FinalizePod) and finalize.status is not None
    assert finalize.status["phase"] == "Succeeded"


def test_a_terminal_pod_deleted_at_once_and_held_by_finalizers_is_left_alone() -> None:
    held = pod("held", deleting=True, phase="Failed")
    held["metadata"]["deletionGracePeriodSeconds"] = 0
    assert World().add(held).plan() == []
    held["metadata"]["deletionGracePeriodSeconds"] = 30  # deleted, not yet by us
    [finalize] = World().add(held).plan()
    assert isinstance(finalize, FinalizePod) and finalize.status is None


def test_finished_pod_never_gets_a_create_and_its_instance_goes() -> None:
    world = World().add(pod("done", phase="Succeeded"), instance("uid-done"))
    assert kinds(world.plan()) == ["Terminate", "Event"]
    world.apply(world.plan())
    assert not [a for a in world.plan() if isinstance(a, Create)]


def test_instances_without_our_owner_tag_are_never_touched() -> None:
    foreign = instance("uid-x", owner="someone-else/node")
    world = World().add(foreign, instance(None, owner="other"))
    world.now = T0 + timedelta(hours=1)
    for _ in range(3):
        actions = world.plan()
        assert not [a for a in actions if isinstance(a, Terminate)]
        world.apply(actions)


def test_orphan_is_terminated_on_its_second_sighting_once_old_enough() -> None:
    world = World().add(instance("uid-lost"))
    world.now = T0 + timedelta(seconds=SETTINGS.timing.orphan_grace_time + 1)
    first = world.plan()
    assert kinds(first) == ["SaveRow"]
    world.apply(first)
    assert kinds(world.plan()) == ["Terminate"]


def test_young_orphan_waits_for_the_grace_period() -> None:
    world = World().add(instance("uid-lost", created=T0))
    world.now = T0 + timedelta(seconds=10)
    world.apply(world.plan())
    assert not [a for a in world.plan() if isinstance(a, Terminate)]


PAST_GRACE = timedelta(seconds=SETTINGS.timing.create_grace_time + 10)


def test_duplicates_keep_the_mapped_instance() -> None:
    older = instance("uid-a", created=T0)
    mapped = instance("uid-a", created=T0 + timedelta(seconds=5))
    world = World().add(pod("a", phase="Running"), older, mapped)
    world.apply([SaveRow(world_row(world, "uid-a", mapped.id))])
    world.now = T0 + PAST_GRACE
    terminated = [a.instance_id for a in world.plan() if isinstance(a, Terminate)]
    assert terminated == [older.id]


def test_duplicates_keep_the_instance_the_pods_annotation_names_over_the_mapped_one() -> None:
    """Writers with different databases map different instances, but read the same pod."""
    named = instance("uid-a", created=T0 + timedelta(seconds=5))
    mapped = instance("uid-a", created=T0)
    world = World().add(
        pod("a", phase="Running", annotations={"runpod.io/pod-id": named.id}), named, mapped
    )
    world.apply([SaveRow(world_row(world, "uid-a", mapped.id))])
    world.now = T0 + PAST_GRACE
    actions = world.plan()
    assert [a.instance_id for a in actions if isinstance(a, Terminate)] == [mapped.id]
    assert [a.instance.id for a in actions if isinstance(a, Adopt)] == [named.id]


def test_a_duplicate_younger_than_the_create_grace_is_left_alone_until_it_is_over() -> None:
    """It may be another writer's create that it has yet to record."""
    kept = instance("uid-a", created=T0)
    young = instance("uid-a", created=T0 + timedelta(seconds=60))
    world = World().add(pod("a", phase="Running"), kept, young)
    world.apply([SaveRow(world_row(world, "uid-a", kept.id))])
    world.now = T0 + timedelta(seconds=61)
    assert not [a for a in world.plan() if isinstance(a, Terminate)]
    world.now = young.created_at + timedelta(seconds=SETTINGS.timing.create_grace_time)
    assert [a.instance_id for a in world.plan() if isinstance(a, Terminate)] == [young.id]


def test_two_writers_with_their_own_rows_keep_one_instance_and_fail_no_pod() -> None:
    """Each writer created an instance for the pod and maps its own. Taking
    turns, they agree through the pod's annotation, so one instance survives."""
    first = instance("uid-a", created=T0)
    second = instance("uid-a", created=T0 + timedelta(seconds=2))
    a = World().add(pod("a", phase="Running"), first, second)
    b = World(pods=a.pods, instances=a.instances)  # the same worlds, another database
    a.apply([SaveRow(world_row(a, "uid-a", first.id))])
    b.apply([SaveRow(world_row(b, "uid-a", second.id))])
    for turn in range(24):
        writer = (a, b)[turn % 2]
        writer.now = b.now = a.now = T0 + timedelta(seconds=15 * (turn + 1))
        writer.apply(writer.plan())
    assert len(a.instances) == 1
    assert a.pods["uid-a"]["status"]["phase"] != "Failed"
    [survivor] = a.instances
    assert a.rows["uid-a"].instance_id == b.rows["uid-a"].instance_id == survivor


def test_without_a_row_duplicates_keep_the_oldest() -> None:
    older = instance("uid-a", created=T0)
    newer = instance("uid-a", created=T0 + timedelta(seconds=5))
    world = World().add(pod("a"), newer, older)
    world.now = T0 + PAST_GRACE
    actions = world.plan()
    assert [a.instance_id for a in actions if isinstance(a, Terminate)] == [newer.id]
    assert [a.instance.id for a in actions if isinstance(a, Adopt)] == [older.id]


def test_in_doubt_create_waits_for_the_grace_period_then_retries() -> None:
    world = World().add(pod("train"))
    [create] = world.plan()
    assert isinstance(create, Create)
    world.apply([SaveRow(create.row)])  # crashed after the intent: no instance id
    world.now = T0 + timedelta(seconds=SETTINGS.timing.create_grace_time - 1)
    assert world.plan() == []
    world.now = T0 + timedelta(seconds=SETTINGS.timing.create_grace_time + 1)
    assert kinds(world.plan()) == ["Create"]


def test_in_doubt_create_that_appears_is_adopted() -> None:
    world = World().add(pod("train"))
    [create] = world.plan()
    assert isinstance(create, Create)
    world.apply([SaveRow(create.row)])
    world.add(instance("uid-train"))
    actions = world.plan()
    assert kinds(actions)[:2] == ["Adopt", "Event"]
    assert not [a for a in actions if isinstance(a, Create)]


def test_lost_database_is_rebuilt_from_owner_tags_without_a_second_create() -> None:
    world = World().add(pod("train", phase="Running"), instance("uid-train"))
    actions = world.plan()
    assert "Adopt" in kinds(actions) and "Create" not in kinds(actions)


def test_lost_database_with_a_vanished_instance_trusts_the_pod_annotation() -> None:
    world = World().add(pod("train", phase="Running", annotations={"runpod.io/pod-id": "inst-old"}))
    [save] = world.plan()
    assert isinstance(save, SaveRow) and save.row.instance_id == "inst-old"
    world.apply([save])
    world.now = T0 + timedelta(seconds=SETTINGS.timing.create_grace_time + 1)
    status = next(a for a in world.plan() if isinstance(a, PatchStatus)).status
    assert status["phase"] == "Failed" and status["reason"] == PodReason.INSTANCE_LOST


@pytest.mark.parametrize("state", [MappingState.PENDING, MappingState.CREATING])
def test_a_waiting_row_gives_way_to_the_instance_another_writer_wrote_on_the_pod(
    state: MappingState,
) -> None:
    """Our row still waits (a create refused with 429, or one in doubt past its grace)
    while another writer (its own database) made the instance, wrote it onto the pod and
    released the Lease; RunPod's list does not show it yet. The pod's record wins: no
    second create (the chaos campaign's duplicate, 59 ms after the first)."""
    world = World().add(pod("train"))
    [create] = world.plan()
    assert isinstance(create, Create)
    world.rows["uid-train"] = create.row.changed(state=state)
    world.now = T0 + timedelta(seconds=SETTINGS.timing.create_grace_time + 1)
    world.pods["uid-train"]["metadata"]["annotations"] = {"runpod.io/pod-id": "inst-other"}
    [save] = world.plan()
    assert isinstance(save, SaveRow) and save.row.instance_id == "inst-other"
    assert save.row.state is MappingState.RUNNING
    world.apply([save])
    assert not [a for a in world.plan() if isinstance(a, Create)]


def test_instance_deleted_behind_our_back_fails_the_pod() -> None:
    world = World().add(pod("serve", ports=[22]))
    world.apply(world.plan())
    world.apply(world.plan())
    world.instances.clear()
    world.now = T0 + timedelta(seconds=SETTINGS.timing.create_grace_time + 1)
    actions = world.plan()
    failed = next(a for a in actions if isinstance(a, PatchStatus))
    assert failed.status["reason"] == PodReason.INSTANCE_LOST
    assert any(isinstance(a, Event) and a.reason == PodReason.INSTANCE_LOST for a in actions)
    world.apply(actions)
    assert not [a for a in world.plan() if isinstance(a, Create)]


def test_runpod_error_fails_the_pod_and_releases_the_instance() -> None:
    broken = instance("uid-b", status=InstanceStatus.ERROR)
    world = World().add(pod("b", phase="Running"), broken)
    actions = world.plan()
    assert {"PatchStatus", "Terminate"} <= set(kinds(actions))
    status = next(a for a in actions if isinstance(a, PatchStatus)).status
    assert status["phase"] == "Failed"


def test_batch_pod_exit_zero_succeeds_and_releases_the_instance() -> None:
    stopped = instance("uid-job", status=InstanceStatus.EXITED)
    world = World().add(
        pod("job", phase="Running", restart_policy="Never", command=["python", "train.py"]), stopped
    )
    world.exit_codes = {stopped.id: 0}
    actions = world.plan()
    status = next(a for a in actions if isinstance(a, PatchStatus)).status
    assert status["phase"] == "Succeeded"
    assert [a.instance_id for a in actions if isinstance(a, Terminate)] == [stopped.id]


def test_batch_pod_exit_code_is_kept_in_the_container_status() -> None:
    stopped = instance("uid-job", status=InstanceStatus.EXITED)
    world = World().add(
        pod("job", phase="Running", restart_policy="Never", command=["false"]), stopped
    )
    world.exit_codes = {stopped.id: 3}
    status = next(a for a in world.plan() if isinstance(a, PatchStatus)).status
    assert status["phase"] == "Failed"
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3


def test_unread_exit_code_waits_instead_of_guessing() -> None:
    stopped = instance("uid-job", status=InstanceStatus.EXITED)
    world = World().add(
        pod("job", phase="Running", restart_policy="Never", command=["true"]), stopped
    )
    # No status guessed, nothing terminated: the row only notes when the wait began.
    assert kinds(world.plan()) == ["Adopt", "Event", "SaveRow"]
    world.apply(world.plan())
    assert world.plan() == []


def test_unknown_instance_status_is_never_acted_on() -> None:
    odd = instance("uid-o", status=InstanceStatus.UNKNOWN)
    world = World().add(pod("o", phase="Running"), odd)
    world.apply([SaveRow(world_row(world, "uid-o", odd.id))])
    assert world.plan() == []


def test_invalid_annotation_keeps_the_pod_pending_with_a_reason_then_fails() -> None:
    world = World().add(pod("bad", annotations={"runpod.io/required-gpu-memory": "abc"}))
    actions = world.plan()
    event = next(a for a in actions if isinstance(a, Event))
    assert event.reason is PodReason.INVALID_ANNOTATION
    assert "runpod.io/required-gpu-memory" in event.message
    status = next(a for a in actions if isinstance(a, PatchStatus)).status
    assert status["phase"] == "Pending"
    waiting = status["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == PodReason.INVALID_ANNOTATION
    world.apply(actions)
    assert world.plan() == []  # same reason: no second event, no second patch
    world.now = T0 + timedelta(seconds=SETTINGS.timing.max_pending_time + 1)
    failed = next(a for a in world.plan() if isinstance(a, PatchStatus)).status
    assert failed["phase"] == "Failed" and failed["reason"] == PodReason.INVALID_ANNOTATION


def test_impossible_gpu_request_fails_at_once() -> None:
    world = World().add(pod("huge", annotations={"runpod.io/required-gpu-memory": "640"}))
    status = next(a for a in world.plan() if isinstance(a, PatchStatus)).status
    assert status["phase"] == "Failed" and status["reason"] == PodReason.UNSATISFIABLE_GPU_REQUEST


def test_instance_cap_makes_creates_wait_with_budget_exceeded() -> None:
    world = World(settings=Settings.of(cluster_id="cluster-a", max_instances=1))
    world.add(pod("a", created=T0), pod("b", created=T0 + timedelta(seconds=1)))
    actions = world.plan()
    assert [a.pod.name for a in actions if isinstance(a, Create)] == ["a"]
    budget = [a for a in actions if isinstance(a, Event) and a.reason == PodReason.BUDGET_EXCEEDED]
    assert [e.pod.name for e in budget] == ["b"]


def test_spend_cap_offers_only_the_gpus_that_fit_the_remaining_budget() -> None:
    world = World(settings=Settings.of(cluster_id="cluster-a", max_hourly_spend=1.0))
    world.add(pod("a"), pod("b", created=T0 + timedelta(seconds=1)))
    actions = world.plan()
    [create] = [a for a in actions if isinstance(a, Create)]
    assert [c.gpu_type_id for c in create.candidates] == ["NVIDIA GeForce RTX 4090"]
    budget = [a for a in actions if isinstance(a, Event) and a.reason == PodReason.BUDGET_EXCEEDED]
    assert [e.pod.name for e in budget] == ["b"]  # 0.69 + 0.69 would pass $1/h


def test_rate_budget_bounds_creates_oldest_first() -> None:
    world = World(rate_budget=5)
    for n in range(6):
        world.add(pod(f"p{n}", created=T0 - timedelta(seconds=n)))
    created = [a.pod.name for a in world.plan() if isinstance(a, Create)]
    assert created == ["p5", "p4"]  # budget 5 keeps 3 in reserve


def test_active_deadline_fails_a_running_pod() -> None:
    running = pod("slow", phase="Running")
    running["spec"]["activeDeadlineSeconds"] = 60
    running["status"]["startTime"] = "2026-03-01T12:00:00Z"
    world = World().add(running, instance("uid-slow"))
    world.now = T0 + timedelta(seconds=61)
    actions = world.plan()
    status = next(a for a in actions if isinstance(a, PatchStatus)).status
    assert status["reason"] == PodReason.DEADLINE_EXCEEDED
    assert any(isinstance(a, Terminate) for a in actions)


def test_daemonset_and_mirror_pods_are_ignored() -> None:
    ds = pod("ds")
    ds["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "x", "uid": "1"}]
    mirror = pod("mirror", annotations={"kubernetes.io/config.mirror": "abc"})
    assert World().add(ds, mirror).plan() == []


def test_metadata_annotations_name_the_instance() -> None:
    world = World().add(pod("serve", ports=[22]))
    world.apply(world.plan())
    patch = next(a for a in world.plan() if isinstance(a, PatchStatus))
    assert patch.annotations["runpod.io/pod-id"].startswith("inst")
    assert patch.annotations["runpod.io/gpu-type"] == "NVIDIA GeForce RTX 4090"


def world_row(world: World, uid: str, instance_id: str):  # type: ignore[no-untyped-def]
    from reconciler.core.mapping import MappingRow

    p = world.pods[uid]
    return MappingRow(
        uid, "ml", p["metadata"]["name"], MappingState.RUNNING, T0, T0, instance_id=instance_id
    )


def test_a_pod_whose_planning_crashes_waits_with_a_reason_and_the_others_go_on() -> None:
    """An error while planning one pod is that pod's, never the tick's."""
    broken = pod("broken")
    broken["spec"]["containers"][0]["resources"] = "not a map"  # crashes translation
    world = World().add(pod("a"), broken, pod("b"))
    actions = world.plan()
    created = sorted(a.pod.name for a in actions if isinstance(a, Create))
    assert created == ["a", "b"]
    [event] = [a for a in actions if isinstance(a, Event) and a.pod.name == "broken"]
    assert event.reason == "InvalidPodSpec" and "AttributeError" in event.message
    world.apply(actions)
    world.now = T0 + timedelta(seconds=SETTINGS.timing.max_pending_time + 1)
    failed = [a for a in world.plan() if isinstance(a, PatchStatus) and a.pod.name == "broken"]
    assert failed and failed[0].status["phase"] == "Failed"
    assert failed[0].status["reason"] == "InvalidPodSpec"


@pytest.mark.parametrize("state", ["running", "terminated"])
def test_a_pod_whose_status_shows_it_ran_is_never_created_again_with_rows_lost(
    state: str,
) -> None:
    """The rows are lost and nothing records the instance (no runpod.io/pod-id), but
    the pod's container status, which only we write from an instance we saw, shows a
    process of it started (or ended): creating again would run its work a second time."""
    ran = pod("train", restart_policy="OnFailure", command=["python", "train.py"])
    ran["status"]["containerStatuses"] = [
        {"name": "main", "ready": False, "restartCount": 0, "state": {state: {}}}
    ]
    actions = World().add(ran).plan()
    assert not [a for a in actions if isinstance(a, Create)]
    failed = next(a for a in actions if isinstance(a, PatchStatus))
    assert failed.status["reason"] == PodReason.INSTANCE_LOST


def test_one_row_per_instance_id_whatever_the_plan_says() -> None:
    """A row write mapping an instance another pod's row maps would fail every commit
    of the tick (the rows' instance ids are unique): it is left out, and so is a second
    such write within one plan; other writes and effects stay."""

    def row(uid: str, instance_id: str) -> MappingRow:
        return MappingRow(uid, "ns", uid, MappingState.RUNNING, T0, T0, instance_id=instance_id)

    ref = PodRef("ns", "b", "b")
    actions: list[Action] = [
        SaveRow(row("b", "inst-1")),
        Adopt(ref, instance("b"), row("b", "inst-1")),
        SaveRow(row("c", "inst-2")),
        SaveRow(row("d", "inst-2")),
        Terminate("inst-1", TerminateReason.DUPLICATE, "x", ref, row("b", "inst-1")),
        SaveRow(row("a", "inst-1")),
    ]
    kept = one_row_per_instance(actions, [row("a", "inst-1")])
    assert kept == [actions[2], replace(actions[4], row=None), actions[5]]
