"""Every built-in action has one place that carries it out: the executor itself (the pods'
own actions) or exactly one built-in resource's steps, whose `actions` route it. A new
built-in action that no steps name would fail every tick that plans it."""

from __future__ import annotations

from collections import Counter
from typing import get_args

from reconciler.core.actions import (
    Action,
    Bind,
    BuiltinAction,
    Event,
    FinalizePod,
    PatchMetadata,
    PatchStatus,
)
from reconciler.runtime.tick.resources.clusters import ClusterSteps
from reconciler.runtime.tick.resources.instance_steps import InstanceSteps
from reconciler.runtime.tick.resources.registries import RegistrySteps
from reconciler.runtime.tick.resources.volume_steps import VolumeSteps

EXECUTORS_OWN: tuple[type[Action], ...] = (PatchStatus, PatchMetadata, FinalizePod, Bind, Event)


def test_every_builtin_action_is_carried_out_in_exactly_one_place() -> None:
    routed = Counter(
        kind
        for steps in (ClusterSteps, InstanceSteps, RegistrySteps, VolumeSteps)
        for kind in steps.actions
    )
    routed.update(EXECUTORS_OWN)
    assert routed == Counter(get_args(BuiltinAction))


def test_every_builtin_action_says_what_a_dry_run_lists_of_it() -> None:
    for kind in get_args(BuiltinAction):
        assert callable(getattr(kind, "shown", None)), kind.__name__
