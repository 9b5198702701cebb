"""Planner rules that keep money from leaking: ownership beyond the env tags,
the exit-code bound of batch instances, namespace budgets, the leak audit and the spend
annotation. Pure: the in-memory world of world.py, no I/O."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from reconciler.core.actions import (
    Create,
    EnsureRegistryAuth,
    Event,
    PatchMetadata,
    PatchStatus,
    RestoreTags,
    Terminate,
)
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV, STOP_ON_EXIT_ENV, exit_nonce
from reconciler.core.domain import BillingRecord, Instance
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.money.charges import LEAK_REASON, SPEND_ANNOTATION
from reconciler.core.money.namespace_caps import NamespaceCaps, caps_from_annotations
from reconciler.core.planner import CreateInputs, ownership_of, plan_tick
from reconciler.core.pods.ownership import Ownership, lookalikes, owned_instances
from reconciler.core.reasons import Notice, PodReason, TerminateReason
from reconciler.core.resources.registries import registry_name
from reconciler.core.translate.names import instance_name

from .world import OWNER, SETTINGS, T0, World, instance, kinds, pod


def _running(
    world: World, name: str, *, restart_policy: str = "Always", namespace: str = "ml"
) -> Instance:
    """A pod Running on its instance, rows and annotations settled."""
    live = pod(
        name,
        phase="Pending",
        restart_policy=restart_policy,
        command=["python", "x.py"] if restart_policy != "Always" else None,
    )
    live["metadata"]["namespace"] = namespace
    found = replace(instance(live["metadata"]["uid"]), name=instance_name(live))
    world.add(live, found)
    for _ in range(3):
        world.apply(world.plan())
    return found


def _strip_tags(world: World, instance_id: str, env: dict[str, str]) -> None:
    """Someone PATCHed the env (or edited it in the console): it is replaced whole."""
    world.instances[instance_id] = replace(world.instances[instance_id], env=env)


def test_a_mapped_instance_whose_env_was_replaced_gets_its_tags_back() -> None:
    world = World()
    found = _running(world, "serve")
    _strip_tags(world, found.id, {"HF_TOKEN_FILE": "/secrets/hf"})
    actions = world.plan()
    restore = [a for a in actions if isinstance(a, RestoreTags)]
    assert [r.instance_id for r in restore] == [found.id]
    # PATCH replaces env whole: what it has now goes back with the tags.
    assert restore[0].env == {
        "HF_TOKEN_FILE": "/secrets/hf",
        OWNER_ENV: OWNER,
        POD_UID_ENV: "uid-serve",
    }
    assert any(isinstance(a, Event) and a.reason is Notice.TAGS_RESTORED for a in actions)
    # Never a failed pod, never a second instance, never a terminate for it.
    assert not any(isinstance(a, PatchStatus | Create | Terminate) for a in actions)
    world.apply(actions)
    assert world.plan() == []


def test_a_pod_id_annotation_naming_someone_elses_instance_claims_nothing() -> None:
    """Anyone who may edit a pod may write its runpod.io/pod-id: naming an untagged
    instance of someone else in the account must not make it ours to retag or delete."""
    world = World()
    theirs = replace(instance(None, instance_id="theirs"), env={}, name="notebook")
    hostile = pod("hostile", annotations={"runpod.io/pod-id": "theirs"})
    world.add(hostile, theirs)
    for _ in range(3):
        actions = world.plan()
        assert not any(isinstance(a, RestoreTags | Terminate) for a in actions), actions
        world.apply(actions)
    world.pods.pop(hostile["metadata"]["uid"])
    world.now += timedelta(hours=1)
    assert not any(isinstance(a, RestoreTags | Terminate) for a in world.plan())


def test_an_ownership_worked_out_for_another_owner_is_worked_out_again() -> None:
    """The engine hands its ownership along with the observation; one worked out for
    another owner id (to which our tagged instance is not its own) must not decide."""
    world = World()
    _running(world, "serve")
    world.add(pod("waiting", phase="Pending"))
    observed = world.observe()
    foreign = Ownership.of("other-cluster/node", observed.instances, observed.rows, observed.pods)
    assert foreign.owned == {}
    handed = replace(observed, ownership=foreign)
    assert ownership_of(handed, OWNER).owned == ownership_of(observed, OWNER).owned != {}
    assert plan_tick(handed, world.settings, world.now) == world.plan()


def test_the_pod_id_annotation_proves_ownership_when_the_rows_are_gone_too() -> None:
    world = World()
    found = _running(world, "job", restart_policy="Never")
    world.rows.clear()
    _strip_tags(world, found.id, {})
    actions = world.plan()
    restore = next(a for a in actions if isinstance(a, RestoreTags))
    assert restore.env == {
        OWNER_ENV: OWNER,
        POD_UID_ENV: "uid-job",
        STOP_ON_EXIT_ENV: exit_nonce("uid-job"),
    }
    assert not any(isinstance(a, Create | Terminate) for a in actions)
    assert "FailPod" not in kinds(actions)


def test_an_instance_of_another_owner_is_never_taken() -> None:
    world = World()
    found = _running(world, "serve")
    _strip_tags(world, found.id, {OWNER_ENV: "other-cluster/node"})
    assert owned_instances(world.instances.values(), OWNER, {found.id: "uid-serve"}) == {}
    assert not any(isinstance(a, RestoreTags) for a in world.plan())


def test_with_neither_row_nor_annotation_it_only_looks_like_ours() -> None:
    world = World()
    found = _running(world, "serve")
    world.rows.clear()
    world.pods["uid-serve"]["metadata"]["annotations"] = {}
    untagged = replace(
        world.instances[found.id], env={}, name=instance_name(world.pods["uid-serve"])
    )
    world.instances[found.id] = untagged
    seen = lookalikes(world.instances.values(), {}, list(world.pods.values()))
    assert [(s.instance_id, s.pod_name) for s in seen] == [(found.id, "serve")]
    # Reported, never touched: no terminate, no restore of a name-only match.
    actions = world.plan()
    assert not any(isinstance(a, Terminate | RestoreTags) for a in actions)
    assert all(getattr(a, "instance_id", None) != found.id for a in actions)
    # Nor a second instance for its pod: that would pay twice.
    assert not any(isinstance(a, Create) for a in actions)
    assert [a.reason for a in actions if isinstance(a, Event)] == [PodReason.UNOWNED_LOOKALIKE]


def test_an_unreadable_exit_code_ends_billing_after_the_bound() -> None:
    world = World()
    found = _running(world, "job", restart_policy="Never")
    stopped = replace(world.instances[found.id], status=found.status.EXITED, cost_per_hr=0.0)
    world.instances[found.id] = stopped
    world.apply(world.plan())  # the wait starts: nothing read yet
    world.now = T0 + timedelta(seconds=world.settings.timing.exit_code_timeout - 1)
    assert world.plan() == []
    world.now = T0 + timedelta(seconds=world.settings.timing.exit_code_timeout + 1)
    world.exit_logs = {found.id: ("epoch 9 done", "Killed")}
    actions = world.plan()
    assert [a.instance_id for a in actions if isinstance(a, Terminate)] == [found.id]
    status = next(a for a in actions if isinstance(a, PatchStatus))
    assert (status.status["phase"], status.status["reason"]) == (
        "Failed",
        PodReason.EXIT_CODE_UNKNOWN,
    )
    terminated = status.status["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == PodReason.EXIT_CODE_UNKNOWN
    assert terminated["message"].endswith("last log lines:\nepoch 9 done\nKilled")
    # The log lines stay on the pod, off the database.
    assert "Killed" not in (status.row.last_error or "")


def test_a_namespace_cap_holds_while_another_namespace_creates() -> None:
    world = World()
    _running(world, "first", namespace="ml")
    world.namespace_caps = {"ml": caps_from_annotations("ml", {"runpod.io/max-instances": "1"})}
    held, free = pod("held"), pod("free")
    free["metadata"]["namespace"] = "research"
    world.add(held, free)
    actions = world.plan()
    assert [a.pod.name for a in actions if isinstance(a, Create)] == ["free"]
    event = next(a for a in actions if isinstance(a, Event) and a.pod.name == "held")
    assert event.reason == PodReason.BUDGET_EXCEEDED
    assert "namespace ml: 1/1 instances" in event.message


def test_a_namespace_spend_cap_counts_list_prices() -> None:
    world = World()
    _running(world, "first")  # 0.69 $/h
    world.namespace_caps = {"ml": NamespaceCaps("ml", max_hourly_spend=1.0)}
    world.add(pod("second"))
    event = next(a for a in world.plan() if isinstance(a, Event))
    assert "$0.69/h of $1.00/h spent" in event.message


def test_only_candidates_within_the_namespace_cap_are_tried() -> None:
    """Admitting a pod on its cheapest candidate, then letting RunPod take a dearer one,
    would break the cap, and the next pod's Event would count that dearer price."""
    world = World(namespace_caps={"ml": NamespaceCaps("ml", max_hourly_spend=1.0)})
    world.add(pod("first"), pod("second"))
    actions = world.plan()
    (create,) = [a for a in actions if isinstance(a, Create)]
    assert [c.gpu_type_id for c in create.candidates] == ["NVIDIA GeForce RTX 4090"]
    event = next(a for a in actions if isinstance(a, Event) and a.pod.name == "second")
    # 0.69 for the GPU and 0.007 for its 50 GB container disk, priced with it.
    assert "$0.70/h of $1.00/h spent" in event.message


def test_an_unreadable_namespace_cap_holds_creates_back() -> None:
    caps = caps_from_annotations("ml", {"runpod.io/max-hourly-spend": "lots"})
    world = World(namespace_caps={"ml": caps}).add(pod("p"))
    actions = world.plan()
    assert not any(isinstance(a, Create) for a in actions)
    assert "runpod.io/max-hourly-spend" in next(a for a in actions if isinstance(a, Event)).message


@pytest.mark.parametrize(
    "value", ["nan", "inf", "1e400", "-0.5", "1_0", " 1 ", "+5", "\uff15", "2000000", "1\n"]
)
def test_a_spend_cap_out_of_range_or_not_plain_digits_is_refused(value: str) -> None:
    caps = caps_from_annotations("ml", {"runpod.io/max-hourly-spend": value})
    assert caps.max_hourly_spend is None
    assert caps.error is not None and "from 0 to 1000000" in caps.error
    assert "\n" not in caps.error


def test_a_spend_cap_in_range_is_read() -> None:
    spend = caps_from_annotations("ml", {"runpod.io/max-hourly-spend": "0.5"})
    assert spend.max_hourly_spend == 0.5
    assert caps_from_annotations("ml", {"runpod.io/max-instances": "0"}).max_instances == 0


def test_billing_after_the_pod_ended_is_a_leak_and_is_terminated() -> None:
    world = World()
    ended = T0 + timedelta(minutes=20)
    row = world.rows.setdefault("uid-gone", world_row("uid-gone", "inst-gone", ended))
    hour = T0 + timedelta(hours=1)
    world.billing = [
        BillingRecord("inst-gone", T0, hour, 0.5),  # its last legitimate hour
        BillingRecord("inst-gone", hour, hour + timedelta(hours=1), 0.69),
        BillingRecord("inst-gone", hour + timedelta(hours=1), hour + timedelta(hours=2), 0.69),
    ]
    world.now = hour + timedelta(hours=2, minutes=7)
    leak = next(a for a in world.plan() if isinstance(a, Terminate))
    # In seconds, from the pod's end and the grace until now, not in whole buckets.
    gone_by = ended + timedelta(seconds=world.settings.timing.orphan_grace_time)
    assert (leak.instance_id, leak.reason, leak.detail, leak.leaked_seconds) == (
        "inst-gone",
        TerminateReason.LEAK,
        LEAK_REASON,
        (world.now - gone_by).total_seconds(),
    )
    assert row.state is MappingState.TERMINATED


def test_the_spend_so_far_is_annotated_on_the_pod() -> None:
    world = World()
    _running(world, "serve")
    world.spend = {"uid-serve": 1.2345}
    patch = next(a for a in world.plan() if isinstance(a, PatchMetadata))
    assert patch.annotations == {SPEND_ANNOTATION: "1.23"}
    world.apply([patch])
    # Only the mirror key catches up with the patch's new resourceVersion.
    assert kinds(world.plan()) == ["SaveRow"]


def world_row(uid: str, instance_id: str, ended: datetime) -> MappingRow:
    return MappingRow(
        uid,
        "ml",
        "gone",
        MappingState.TERMINATED,
        T0,
        T0,
        instance_id=instance_id,
        cost_per_hr=0.69,
        ended_at=ended,
    )


def test_one_registry_credential_is_ensured_per_pull_secret_before_its_creates() -> None:
    """Registry credentials go the way of every cloud resource we make: planned, before
    the creates that pull with them, once per name; a rotated secret is a new name."""
    world = World().add(pod("a"), pod("b"), pod("c"))
    secrets = {
        "uid-a": ("ghcr.io", "robot", "first"),
        "uid-b": ("ghcr.io", "robot", "first"),
        "uid-c": ("ghcr.io", "robot", "second"),
    }
    observed = world.observe()
    inputs = {uid: CreateInputs(pull_secret=secret) for uid, secret in secrets.items()}
    actions = plan_tick(replace(observed, create_inputs=inputs), SETTINGS, T0)
    names = {uid: registry_name(OWNER, *secret) for uid, secret in secrets.items()}
    assert [
        (type(a).__name__, a.name if isinstance(a, EnsureRegistryAuth) else a.registry_name)
        for a in actions
        if isinstance(a, EnsureRegistryAuth | Create)
    ] == [
        ("EnsureRegistryAuth", names["uid-a"]),
        ("Create", names["uid-a"]),
        ("Create", names["uid-a"]),
        ("EnsureRegistryAuth", names["uid-c"]),
        ("Create", names["uid-c"]),
    ]
    assert names["uid-a"] != names["uid-c"]
    assert "first" not in repr(actions)  # the password is never shown
