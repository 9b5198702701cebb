"""Properties of the planner over generated worlds: it converges to a quiet fixpoint,
never creates twice for one pod, never touches an instance that is not ours, never
re-runs finished work, ends with exactly one instance per live pod, and plans the same
whatever order the pods and rows are listed in and whoever worked out the ownership."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.actions import (
    Action,
    Adopt,
    Bind,
    Create,
    FinalizePod,
    PatchMetadata,
    PatchStatus,
    SaveRow,
    Terminate,
)
from reconciler.core.domain import InstanceStatus
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.planner import ownership_of, plan_tick
from tests.planner.world import OWNER, T0, World, instance, pod

PHASES = ["Pending", "Running", "Succeeded", "Failed"]
# Actions with a side effect outside the database.
_SIDE_EFFECTS = (Create, Adopt, Terminate, PatchStatus, PatchMetadata, FinalizePod, Bind)
STATUSES = [
    InstanceStatus.PROVISIONING,
    InstanceStatus.RUNNING,
    InstanceStatus.EXITED,
    InstanceStatus.ERROR,
    InstanceStatus.UNKNOWN,
]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    world = World()
    for n in range(draw(st.integers(0, 6))):
        uid = f"uid-{n}"
        phase = draw(st.sampled_from(PHASES))
        world.add(
            pod(
                f"p{n}",
                uid,
                phase=phase,
                deleting=draw(st.booleans()),
                restart_policy=draw(st.sampled_from(["Always", "Never"])),
                command=["run"],
                created=T0 - timedelta(seconds=n),
            )
        )
        for _ in range(draw(st.integers(0, 2))):
            made = instance(
                uid,
                status=draw(st.sampled_from(STATUSES)),
                created=T0 - timedelta(minutes=draw(st.integers(0, 30))),
            )
            world.add(made)
            world.exit_codes[made.id] = draw(st.sampled_from([0, 1, None]))
        if draw(st.booleans()):
            state = draw(st.sampled_from(list(MappingState)))
            world.rows[uid] = MappingRow(uid, "ml", f"p{n}", state, T0, T0, attempt_started_at=T0)
    for n in range(draw(st.integers(0, 2))):  # orphans and strangers
        world.add(instance(f"gone-{n}", created=T0 - timedelta(hours=1)))
        world.add(instance(f"uid-{n}", owner="another-cluster/node"))
    return world


def run(world: World, ticks: int = 6) -> list[list[Action]]:
    plans = []
    for _ in range(ticks):
        actions = world.plan()
        plans.append(actions)
        world.apply(actions)
        world.now += timedelta(minutes=10)  # past every grace period
    return plans


@given(worlds())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_converges_to_a_tick_that_changes_nothing(world: World) -> None:
    plans = run(world)
    assert plans[-1] == [], plans[-1]
    assert plans[-2] == [], "took more than four ticks to settle"


@given(worlds())
@settings(max_examples=150, deadline=None)
def test_never_two_creates_for_one_pod_in_a_plan(world: World) -> None:
    for actions in run(world):
        uids = [a.pod.uid for a in actions if isinstance(a, Create)]
        assert len(uids) == len(set(uids))


@given(worlds())
@settings(max_examples=150, deadline=None)
def test_never_terminates_what_is_not_ours(world: World) -> None:
    foreign = {i.id for i in world.instances.values() if i.owner != OWNER}
    for actions in run(world):
        assert not foreign & {a.instance_id for a in actions if isinstance(a, Terminate)}


@given(worlds())
@settings(max_examples=150, deadline=None)
def test_finished_pods_never_get_a_create(world: World) -> None:
    finished = {
        uid for uid, p in world.pods.items() if p["status"]["phase"] in ("Succeeded", "Failed")
    }
    finished |= {uid for uid, r in world.rows.items() if r.state.finished}
    for actions in run(world):
        assert not finished & {a.pod.uid for a in actions if isinstance(a, Create)}


@given(worlds())
@settings(max_examples=150, deadline=None)
def test_settled_world_has_one_instance_per_running_pod_and_no_orphans(world: World) -> None:
    run(world)
    ours = [i for i in world.instances.values() if i.owner == OWNER]
    by_pod: dict[str | None, int] = {}
    for i in ours:
        by_pod[i.pod_uid] = by_pod.get(i.pod_uid, 0) + 1
    assert all(count == 1 for count in by_pod.values())
    for uid in by_pod:
        assert uid in world.pods, f"orphan instance for {uid} survived"
        p = world.pods[uid]
        assert p["status"]["phase"] not in ("Succeeded", "Failed")


@given(worlds(), st.randoms(use_true_random=False))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_plan_is_the_same_in_any_list_order_and_with_the_ownership_passed_along(
    world: World, shuffle: random.Random
) -> None:
    """The planner decides pods in the order they were listed but plans in UID order;
    the engine hands it the ownership it worked out while observing. Neither may change
    a plan (instances keep their order: tags are restored in the list's order)."""
    for _ in range(4):
        observed = world.observe()
        expected = plan_tick(observed, world.settings, world.now)
        shuffled = replace(
            observed,
            pods=shuffle.sample(list(observed.pods), len(observed.pods)),
            rows=shuffle.sample(list(observed.rows), len(observed.rows)),
        )
        assert plan_tick(shuffled, world.settings, world.now) == expected
        passed = replace(shuffled, ownership=ownership_of(shuffled, OWNER))
        assert plan_tick(passed, world.settings, world.now) == expected
        world.apply(expected)
        world.now += timedelta(minutes=10)


def test_a_steady_plan_has_no_mutation_and_no_row_write() -> None:
    world = World().add(pod("serve", ports=[22]))
    run(world, 3)
    actions = world.plan()
    assert not [a for a in actions if isinstance(a, (*_SIDE_EFFECTS, SaveRow))]
