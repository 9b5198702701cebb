"""The decision of one tick: `plan_tick(observation, settings, now) -> [Action]`.

Pure: no I/O, no clock, no randomness. The planner looks at each pod UID once, with its
pod (if the object exists), its mapping row (if we have one) and the owned instances
tagged with that UID, and decides what moves that triple one step closer to agreement
(`plan.lifecycle`, `plan.running`). Creates are collected and admitted last, oldest pod
first, against the instance, spend and rate budgets (`plan.admission`). This module
only puts the concerns of `reconciler.core.plan` together (docs/architecture.md §2).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from reconciler.core.actions import Action, Adopt, DeleteRow, Event, PodRef, SaveRow
from reconciler.core.config import Settings
from reconciler.core.domain import Instance, KubeObject
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.plan.admission import Waiting, admit
from reconciler.core.plan.gangs import plan_gangs
from reconciler.core.plan.lifecycle import decide
from reconciler.core.plan.money_guards import (
    leaks,
    price_differences,
    restore_tags,
    spend_annotations,
)
from reconciler.core.plan.observation import CreateInputs, Observation
from reconciler.core.plan.outcomes import cannot_create
from reconciler.core.plan.situation import Situation, lookalikes_by_pod, ownership_of
from reconciler.core.pods import daemonsets, podinfo
from reconciler.core.pods.offload import plan_offloads
from reconciler.core.reasons import PodReason
from reconciler.core.translate.errors import TranslationError

__all__ = ["CreateInputs", "Observation", "PlanError", "ownership_of", "plan_tick"]


PlanError = Callable[[str, Exception], None]
"""Told of an error while planning one pod (the engine logs its traceback at debug)."""


def _ignore_error(_uid: str, _exc: Exception) -> None:
    """No one to tell."""


def plan_tick(
    obs: Observation, settings: Settings, now: datetime, on_error: PlanError = _ignore_error
) -> list[Action]:
    tick = Situation(obs, settings, now)
    pods = {podinfo.uid(p): p for p in obs.pods if podinfo.is_ours_to_run(p)}
    rows = {row.pod_uid: row for row in obs.rows}
    owners = ownership_of(obs, settings.owner_id)
    owned = owners.owned
    tick.lookalikes = lookalikes_by_pod(owners.lookalikes, pods)
    actions: list[Action] = restore_tags(tick, owners.lost_tags, pods)
    actions += leaks(tick) + spend_annotations(tick, pods) + price_differences(tick, pods)
    # Each UID is decided in the order the lists gave them, which is about the order
    # their objects lie in memory: at 10 000 pods a tenth faster than in UID order,
    # which is kept for the actions. A steady pod decides nothing and is not kept.
    decisions: dict[str, tuple[list[Action], Waiting | None]] = {}
    for uid in dict.fromkeys(itertools.chain(pods, rows, owned)):
        try:
            decided, wait = decide(tick, uid, pods.get(uid), rows.get(uid), owned.get(uid, []))
        except Exception as exc:  # one malformed pod never stops the others
            on_error(uid, exc)
            decided, wait = _undecidable(tick, pods.get(uid), rows.get(uid), uid in owned, exc)
        if decided or wait is not None:
            decisions[uid] = decided, wait
    waiting: list[Waiting] = []
    for uid in sorted(decisions):
        decided, wait = decisions[uid]
        actions += decided
        if wait is not None:
            waiting.append(wait)
    offloads = (
        plan_offloads(obs.pending, settings, now, _offload_room(settings, pods, owned), tick.node)
        if obs.pending
        else []  # the usual tick: spare counting the room for none
    )
    return one_row_per_instance(
        offloads
        + actions
        + admit(tick, waiting)
        + plan_gangs(tick)
        + daemonsets.notices(obs.daemon_pods, now),
        obs.rows,
    )


def one_row_per_instance(actions: list[Action], rows: Iterable[MappingRow]) -> list[Action]:
    """The actions without any row write that would map an instance another pod's row
    maps: the rows' instance ids are unique, and one such write would fail every commit
    of the tick, for every pod. Whatever a pod's annotations say, one row per instance
    id: a row write that would break it is left out (its other effects stay)."""
    if not any(getattr(getattr(a, "row", None), "instance_id", None) for a in actions):
        return actions  # the steady tick: spare indexing every row
    holder = {row.instance_id: row.pod_uid for row in rows if row.instance_id}
    kept: list[Action] = []
    for action in actions:
        row = getattr(action, "row", None)
        if isinstance(row, MappingRow) and row.instance_id:
            if holder.setdefault(row.instance_id, row.pod_uid) != row.pod_uid:
                if isinstance(action, SaveRow | Adopt):
                    continue
                action = dataclasses.replace(action, row=None)  # type: ignore[type-var]
        elif isinstance(action, DeleteRow):
            holder = {i: uid for i, uid in holder.items() if uid != action.pod_uid}
        kept.append(action)
    return kept


def _undecidable(
    tick: Situation,
    pod: KubeObject | None,
    row: MappingRow | None,
    has_instance: bool,
    exc: Exception,
) -> tuple[list[Action], None]:
    """A pod whose planning failed: a waiting reason while nothing runs for it (so it
    fails at --max-pending-time), else an Event only, never a decision about its instance."""
    if pod is None:
        return [], None
    message = f"the reconciler could not plan this pod: {type(exc).__name__}: {exc}"
    reason = exc.reason if isinstance(exc, TranslationError) else PodReason.INVALID_POD_SPEC
    if not has_instance and (row is None or row.state is MappingState.PENDING):
        try:
            return cannot_create(tick, pod, row, reason, message, False), None
        except Exception:  # no status can be built for it: the Event below says why
            pass
    return [Event(PodRef.of(pod), reason, message, warning=True)], None


def _offload_room(
    settings: Settings, pods: Mapping[str, KubeObject], owned: Mapping[str, list[Instance]]
) -> int:
    """Instances we may still add: the cap minus live pods of the node and orphans."""
    live = {
        uid
        for uid, pod in pods.items()
        if not podinfo.is_finished(pod) and not podinfo.is_deleting(pod)
    }
    return settings.caps.max_instances - len(live | set(owned))
