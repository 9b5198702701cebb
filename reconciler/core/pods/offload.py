"""Offload mode: which unscheduled managed pods to bind to the virtual node this tick.

Pure, like the planner. The engine lists Pending pods without a node cluster-wide and
pairs each with its owning Job; this module decides, and `Bind` actions carry it out.
Once bound, a pod is an ordinary pod of the virtual node.

A managed pod (`runpod.io/managed: "true"` on the pod, or on its Job as annotation or
label) is bound when one of the triggers holds:
- forced: `runpod.io/offload: "true"` on the pod or its Job;
- waited: unschedulable (PodScheduled=False, reason Unschedulable) for longer than
  `max_pending_time_before_offload` (the pod or Job may override it by annotation);
- overflow: more than `pending_threshold` managed pods are unschedulable; the oldest
  go, as many as exceed the threshold.
`runpod.io/offload: "false"` opts a managed pod out of the waited and overflow triggers.

Binding cannot be undone, so the two automatic triggers keep to the instance cap: a pod
the scheduler may yet place locally is not pinned to a node that cannot run it. A forced
pod is bound regardless and shows why it waits, as every pod of the virtual node does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.core.actions import Action, Bind, Event, PodRef
from reconciler.core.config import YEAR, Settings
from reconciler.core.domain import KubeObject
from reconciler.core.node import placement
from reconciler.core.pods import podinfo
from reconciler.core.reasons import OffloadTrigger
from reconciler.core.translate import annotations as ann
from reconciler.core.translate.errors import TranslationError

MAX_PENDING_TIME_BEFORE_OFFLOAD = ann.MAX_PENDING_TIME_BEFORE_OFFLOAD


@dataclass(frozen=True)
class PendingPod:
    """An unscheduled Pending pod and the Job that owns it, if any."""

    pod: KubeObject
    job: KubeObject | None = None


@dataclass(frozen=True)
class _Candidate:
    pod: KubeObject
    forced: bool
    opted_out: bool
    wait_limit: float
    unschedulable_since: datetime | None


def has_candidates(pending: Sequence[PendingPod]) -> bool:
    """Whether any pod may be bound this tick (then the engine reads the live Node)."""
    for entry in pending:
        try:
            if _unbound(entry.pod) and ann.is_managed(entry.pod, entry.job):
                return True
        except TranslationError:
            return True  # plan_offloads tells the pod why
    return False


def plan_offloads(
    pending: Sequence[PendingPod], settings: Settings, now: datetime, room: int, node: KubeObject
) -> list[Action]:
    """Binds (and Events for unreadable annotations); `room` caps the automatic triggers.

    `node` is the live Node: cordoned, or with a taint a pod does not tolerate, it gets
    no pod, whatever the trigger (`kubectl cordon` stops new spending)."""
    actions: list[Action] = []
    waiting: list[_Candidate] = []
    for entry in pending:
        if not _unbound(entry.pod):
            continue
        try:
            candidate = _candidate(entry, settings)
        except TranslationError as error:
            actions.append(Event(PodRef.of(entry.pod), error.reason, error.message, warning=True))
            continue
        if candidate is None:
            continue
        if candidate.forced:
            if placement.closed_to(candidate.pod, node) is not None:
                continue
            actions.append(
                Bind(
                    PodRef.of(entry.pod),
                    settings.node.name,
                    OffloadTrigger.FORCED,
                    f'{ann.OFFLOAD} is "true"',
                )
            )
        elif candidate.unschedulable_since is not None:
            waiting.append(candidate)
    return actions + _automatic(waiting, settings, now, room, node)


def _unbound(pod: KubeObject) -> bool:
    """Pending without a node, not being deleted, and released by every scheduling gate
    (a gate, as Kueue sets, means someone else still decides whether the pod may run)."""
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and not spec.get("schedulingGates")
        and podinfo.phase(pod) == "Pending"
        and not podinfo.is_deleting(pod)
    )


def _candidate(entry: PendingPod, settings: Settings) -> _Candidate | None:
    """The pod's offload settings; None when it is not managed. Raises on a bad value."""
    pod, job = entry.pod, entry.job
    if not ann.is_managed(pod, job):
        return None
    flag = ann.read(pod, job, ann.OFFLOAD)
    forced = flag is not None and ann.parse_flag(ann.OFFLOAD, flag)
    limit = ann.read_int(pod, job, MAX_PENDING_TIME_BEFORE_OFFLOAD, minimum=0, maximum=int(YEAR))
    return _Candidate(
        pod,
        forced,
        opted_out=flag is not None and not forced,
        wait_limit=settings.placement.max_pending_time_before_offload if limit is None else limit,
        unschedulable_since=unschedulable_since(pod),
    )


def unschedulable_since(pod: KubeObject) -> datetime | None:
    """When the scheduler last found no node for the pod; None if it has not said so."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return podinfo.parse_time(condition.get("lastTransitionTime")) or podinfo.created_at(
                pod
            )
    return None


def _automatic(
    waiting: list[_Candidate], settings: Settings, now: datetime, room: int, node: KubeObject
) -> list[Action]:
    """The waited and overflow triggers, oldest pod first, within `room`."""
    waiting.sort(key=lambda c: podinfo.oldest_first(c.pod))
    excess = (
        (len(waiting) - settings.placement.pending_threshold)
        if settings.placement.pending_threshold
        else 0
    )
    actions: list[Action] = []
    for candidate in waiting:
        if room <= 0:
            break
        trigger = _trigger(candidate, settings, now, excess, len(waiting))
        if (
            trigger is None
            or placement.closed_to(candidate.pod, node) is not None
            or placement.exclusion(candidate.pod, node) is not None
        ):
            continue
        actions.append(Bind(PodRef.of(candidate.pod), settings.node.name, *trigger))
        room, excess = room - 1, excess - 1
    return actions


def _trigger(
    candidate: _Candidate, settings: Settings, now: datetime, excess: int, unschedulable: int
) -> tuple[OffloadTrigger, str] | None:
    if candidate.opted_out or candidate.unschedulable_since is None:
        return None
    # The stamp is the API server's clock: a little ahead of ours must not read as "not
    # yet", or a limit of 0 would wait for the next periodic tick.
    waited = max(0.0, (now - candidate.unschedulable_since).total_seconds())
    if waited >= candidate.wait_limit:
        return OffloadTrigger.WAITED, (
            f"unschedulable for {int(waited)} s (offload after {int(candidate.wait_limit)} s)"
        )
    if excess > 0:
        return OffloadTrigger.OVERFLOW, (
            f"{unschedulable} managed pods unschedulable, more "
            f"than the threshold of {settings.placement.pending_threshold}"
        )
    return None
