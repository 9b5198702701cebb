"""What a pod is told when it gets no instance: it waits with a visible reason, or fails."""

from __future__ import annotations

from datetime import timedelta

from reconciler.core.actions import (
    Action,
    Event,
    PatchStatus,
    PodRef,
    Terminate,
)
from reconciler.core.domain import (
    Instance,
    KubeObject,
)
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.plan.situation import Situation
from reconciler.core.pods import podinfo
from reconciler.core.reasons import PodReason, TerminateReason
from reconciler.core.translate import status as pod_status


def fail_pod(
    tick: Situation,
    pod: KubeObject,
    row: MappingRow | None,
    instance: Instance | None,
    reason: PodReason,
    message: str,
) -> list[Action]:
    """Fail the pod with a reason kubectl shows, and release its instance if any."""
    ref = PodRef.of(pod)
    row = row or tick.new_row(pod, MappingState.FAILED)
    status = pod_status.pod_status(
        pod, None, exit_code=None, now=tick.now, reason=reason, message=message
    )
    state = MappingState.TERMINATING if instance is not None else MappingState.FAILED
    failed = row.changed(
        state=state,
        reason=reason,
        last_error=message,
        status_hash=pod_status.status_fingerprint(status),
        ended_at=row.ended_at or (None if instance is not None else tick.now),
    )
    actions: list[Action] = [
        PatchStatus(ref, status, failed),
        Event(ref, reason, message, warning=True),
    ]
    if instance is not None:
        actions.append(
            Terminate(instance.id, TerminateReason.POD_FAILED, reason.value, ref, failed)
        )
    return actions


def cannot_create(
    tick: Situation,
    pod: KubeObject,
    row: MappingRow | None,
    reason: PodReason,
    message: str,
    permanent: bool,
) -> list[Action]:
    """Wait with a visible reason, or fail once the reason is permanent or too old."""
    if permanent:
        return fail_pod(tick, pod, row, None, reason, message)
    if waited_too_long(tick, pod):
        return fail_pod(tick, pod, row, None, reason, gave_up(tick, message))
    actions, _ = show_waiting(tick, pod, row, reason, message)
    return actions


def waited_too_long(tick: Situation, pod: KubeObject) -> bool:
    return podinfo.age(pod, tick.now) > timedelta(seconds=tick.settings.timing.max_pending_time)


def gave_up(tick: Situation, message: str | None) -> str:
    return (
        f"{message or 'no instance'}; gave up after {int(tick.settings.timing.max_pending_time)} s"
    )


def show_waiting(
    tick: Situation, pod: KubeObject, row: MappingRow | None, reason: PodReason, message: str
) -> tuple[list[Action], MappingRow]:
    """Keep the pod Pending with `reason` in kubectl's STATUS column; Event on change."""
    ref = PodRef.of(pod)
    row = row or tick.new_row(pod, MappingState.PENDING)
    status = pod_status.pod_status(
        pod, None, exit_code=None, now=tick.now, reason=reason, message=message, pending=True
    )
    fingerprint = pod_status.status_fingerprint(status)
    waiting = row.changed(
        state=MappingState.PENDING,
        reason=reason,
        last_error=message,
        attempt_id=None,
        status_hash=fingerprint,
    )
    actions: list[Action] = []
    if row.reason != reason:
        actions.append(Event(ref, reason, message, warning=True))
    if fingerprint != row.status_hash:
        return [*actions, PatchStatus(ref, status, waiting)], waiting
    return actions + tick.save(row, waiting), waiting
