"""Properties of the planner across ticks in a world with faults (`faulty_world`): calls
whose answers are lost or that are refused, a lagging list, dropped tags, lost rows,
batch processes ending, ticks seconds apart. Whatever the faults, no pod is given a
second instance while its first still exists, unless nothing the planner reads could
tell it existed (the rows lost while the list did not show it yet and before its pod
was annotated); and work that ended never runs again (with the same exception)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reconciler.core.actions import Action, Create, PodRef
from reconciler.core.domain import InstanceStatus
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.pods import podinfo
from reconciler.core.translate.names import instance_name
from tests.planner.faulty_world import Answer, Fault, FaultyWorld, Step
from tests.planner.world import SETTINGS, T0, instance, pod

# Below the create grace: a lag past it makes duplicates by design (they heal).
MAX_LAG = int(SETTINGS.timing.create_grace_time) - 1
# Clean ticks after the faults, half a minute apart: enough for every grace to end.
SETTLE = [Step(30)] * 30
STATUSES = [
    InstanceStatus.PROVISIONING,
    InstanceStatus.RUNNING,
    InstanceStatus.EXITED,
    InstanceStatus.ERROR,
]
LIVE_STATES = [MappingState.PENDING, MappingState.CREATING, MappingState.RUNNING]
Check = Callable[[FaultyWorld, list[Action]], None]


@st.composite
def faulty_worlds(draw: st.DrawFn) -> FaultyWorld:
    world = FaultyWorld(lag=timedelta(seconds=draw(st.integers(0, MAX_LAG))))
    for n in range(draw(st.integers(1, 4))):
        uid = f"uid-{n}"
        made = pod(
            f"p{n}",
            uid,
            phase=draw(st.sampled_from(["Pending", "Pending", "Running", "Succeeded", "Failed"])),
            restart_policy=draw(st.sampled_from(["Always", "Never"])),
            command=["run"],
            created=T0 - timedelta(seconds=n),
        )
        inst = None
        if draw(st.booleans()):
            inst = replace(
                instance(
                    uid,
                    status=draw(st.sampled_from(STATUSES)),
                    created=T0 - timedelta(minutes=draw(st.integers(0, 30))),
                ),
                name=instance_name(made),
            )
            world.add(inst)
            world.exit_codes[inst.id] = draw(st.sampled_from([0, 1, None]))
            if inst.status is InstanceStatus.EXITED:
                world.exited[uid] = inst.id  # its process ended before we looked
            if draw(st.booleans()):
                made["metadata"]["annotations"][podinfo.POD_ID_ANNOTATION] = inst.id
        world.add(made)
        if draw(st.booleans()):
            # A row records an end only once the pod shows it (the patch comes first).
            ended = podinfo.is_finished(made)
            state = draw(st.sampled_from(list(MappingState) if ended else LIVE_STATES))
            mapped = inst.id if inst is not None and draw(st.booleans()) else None
            world.rows[uid] = MappingRow(
                uid, "ml", f"p{n}", state, T0, T0, instance_id=mapped, attempt_started_at=T0
            )
    return world.remember_ours()


steps = st.lists(
    st.builds(
        Step,
        seconds=st.integers(1, 60),
        fault=st.sampled_from([Fault.NONE, Fault.NONE, *Fault]),
        target=st.integers(0, 3),
        exit_code=st.sampled_from([0, 1]),
        answers=st.lists(st.sampled_from([Answer.OK, *Answer]), max_size=6).map(tuple),
    ),
    max_size=25,
)


def play(start: FaultyWorld, history: list[Step], check: Check) -> FaultyWorld:
    """The ticks of `history`, then clean ones; `check` sees each plan before it is
    carried out. On a copy: an @example's world serves more than one test."""
    world = copy.deepcopy(start)
    for step in [*history, *SETTLE]:
        world.before_tick(step)
        world.note_ended()
        actions = world.plan()
        check(world, actions)
        world.apply(actions)
        world.note_ended()
    return world


def no_second_instance(world: FaultyWorld, actions: list[Action]) -> None:
    for create in (a for a in actions if isinstance(a, Create)):
        visible = [
            i.id
            for i in world.live_instances_for(create.pod.uid)
            if not world.hidden_from_everyone(i)
        ]
        assert not visible, f"{world.now}: a create for {create.pod.uid}, whose {visible} exists"


def no_rerun(world: FaultyWorld, actions: list[Action]) -> None:
    """No create for a pod that showed its end, nor for one whose process ended, unless
    that instance stands yet where nothing the planner reads can tell (as above)."""
    for uid in {a.pod.uid for a in actions if isinstance(a, Create)}:
        assert uid not in world.ended, f"{world.now}: a create for {uid}, which ended"
        exited = world.exited.get(uid)
        if exited is not None:
            inst = world.instances.get(exited)
            hidden = inst is not None and world.hidden_from_everyone(inst)
            assert hidden, f"{world.now}: a create for {uid}, whose process ended in {exited}"


def _batch_pod_running() -> FaultyWorld:
    """A batch pod whose instance runs, and whose pod was never annotated with it."""
    world = FaultyWorld()
    made = pod("train", "uid-train", phase="Running", restart_policy="Never", command=["run"])
    inst = replace(instance("uid-train", instance_id="train-1"), name=instance_name(made))
    world.add(made, inst)
    world.rows["uid-train"] = MappingRow(
        "uid-train",
        "ml",
        "train",
        MappingState.RUNNING,
        T0,
        T0,
        instance_id=inst.id,
        attempt_started_at=T0,
    )
    return world.remember_ours()


# The process ends; the tick that sees it has its status patch (Failed) refused and its
# terminate done; then the database is lost. Only the pod could say the work ended.
FINAL_STATUS_REFUSED = [
    Step(10, Fault.EXIT, exit_code=1, answers=(Answer.REFUSED,)),
    Step(10, Fault.LOSE_ROWS),
]


@given(faulty_worlds(), steps)
@example(_batch_pod_running(), FINAL_STATUS_REFUSED)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_never_a_second_instance_for_a_pod_across_ticks(
    world: FaultyWorld, history: list[Step]
) -> None:
    play(world, history, no_second_instance)


@given(faulty_worlds(), steps)
@example(_batch_pod_running(), FINAL_STATUS_REFUSED)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_work_that_ended_never_runs_again(world: FaultyWorld, history: list[Step]) -> None:
    play(world, history, no_rerun)


def test_a_lost_create_answer_is_adopted_once_listed_not_created_again() -> None:
    world = FaultyWorld(lag=timedelta(seconds=MAX_LAG)).add(pod("web")).remember_ours()
    world = play(world, [Step(1, answers=(Answer.LOST,))] + [Step(10)] * 20, no_second_instance)
    assert len(world.live_instances_for("uid-web")) == 1
    assert world.rows["uid-web"].instance_id == next(iter(world.instances))


@pytest.mark.parametrize("check", [no_second_instance, no_rerun])
def test_each_check_fails_a_create_it_is_for(check: Check) -> None:
    """A create for a pod whose instance still runs and whose work ended is caught."""
    world = _batch_pod_running()
    world.exited["uid-train"] = "train-1"
    again = Create(PodRef("ml", "train", "uid-train"), world.rows["uid-train"], ())
    with pytest.raises(AssertionError):
        check(world, [again])
