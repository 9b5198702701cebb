"""A live pod with its instance: adopted, mirrored onto the pod, its exit read and
its end recorded (docs/architecture.md §2 to §4).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from reconciler.core.actions import (
    Action,
    Adopt,
    Event,
    PatchMetadata,
    PatchStatus,
    PodRef,
    Terminate,
)
from reconciler.core.domain import (
    Instance,
    InstanceStatus,
    KubeObject,
)
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.plan import starts
from reconciler.core.plan.outcomes import fail_pod
from reconciler.core.plan.situation import Situation
from reconciler.core.pods import podinfo
from reconciler.core.reasons import Notice, PodReason, TerminateReason
from reconciler.core.translate import status as pod_status
from reconciler.core.translate.container import is_batch

# Like the kubelet's FallbackToLogsOnError: the log's end, at most 80 lines or 2048 bytes.
LOG_TAIL_KEPT_LINES = 80
LOG_TAIL_KEPT_BYTES = 2048
# TERMINATING and the `finished` states, compared by identity: no property call per pod.
_ENDING = (MappingState.TERMINATING, MappingState.TERMINATED, MappingState.FAILED)


def with_instance(
    tick: Situation, pod: KubeObject, row: MappingRow | None, instance: Instance
) -> list[Action]:
    actions: list[Action] = []
    if row is None or row.instance_id != instance.id:
        actions, row = _adopt(tick, PodRef.of(pod), row, instance)
    if row.state in _ENDING:
        return [
            *actions,
            Terminate(
                instance.id,
                TerminateReason.ALREADY_DECIDED,
                row.reason.value if row.reason else "finished",
                PodRef.of(pod),
                row,
            ),
        ]
    if podinfo.deadline_passed(pod, tick.now):
        return actions + fail_pod(
            tick,
            pod,
            row,
            instance,
            PodReason.DEADLINE_EXCEEDED,
            "pod ran longer than spec.activeDeadlineSeconds",
        )
    return actions + _follow_instance(tick, pod, row, instance)


def _adopt(
    tick: Situation, ref: PodRef, row: MappingRow | None, instance: Instance
) -> tuple[list[Action], MappingRow]:
    adopted = adopted_row(tick, ref, instance, row)
    return [
        Adopt(ref, instance, adopted),
        Event(
            ref,
            Notice.ADOPTED_INSTANCE,
            f"found RunPod instance {instance.id} for this pod "
            "and took it over (earlier create or rebuilt state)",
        ),
    ], adopted


def adopted_row(
    tick: Situation, ref: PodRef, instance: Instance, row: MappingRow | None = None
) -> MappingRow:
    base = row or MappingRow(
        ref.uid, ref.namespace, ref.name, MappingState.RUNNING, tick.now, tick.now
    )
    return base.running_on(instance)


def _follow_instance(
    tick: Situation, pod: KubeObject, row: MappingRow, instance: Instance
) -> list[Action]:
    status = instance.status
    if status is InstanceStatus.ERROR:
        return fail_pod(
            tick,
            pod,
            row,
            instance,
            PodReason.INSTANCE_ERROR,
            f"RunPod instance {instance.id} is in an unrecoverable error state",
        )
    if status is InstanceStatus.EXITED:
        return _exited(tick, pod, row, instance)
    if status is InstanceStatus.UNKNOWN:
        return []  # never act on a status we do not understand
    failed = starts.judged(tick, pod, instance)
    if failed is not None:
        return starts.replace_start(tick, pod, row, instance, failed)
    return _mirror(tick, pod, row, instance)


def _exited(tick: Situation, pod: KubeObject, row: MappingRow, instance: Instance) -> list[Action]:
    if not is_batch(pod):
        return fail_pod(
            tick,
            pod,
            row,
            instance,
            PodReason.INSTANCE_STOPPED,
            f"RunPod instance {instance.id} was stopped outside Kubernetes",
        )
    code = row.exit_code if row.exit_code is not None else tick.obs.exit_codes.get(instance.id)
    if code is not None:
        return _finish(tick, pod, row.changed(exit_code=code, exited_at=None), instance)
    # Not readable (yet): the log route fails, or the backfill lacks the marker. The
    # stopped instance still bills its disk, so this lasts --exit-code-timeout at most.
    if row.exited_at is None:
        return tick.save(row, row.changed(exited_at=tick.now))
    if tick.within(row.exited_at, tick.settings.timing.exit_code_timeout):
        return []
    return _exit_code_unknown(tick, pod, row, instance)


def _exit_code_unknown(
    tick: Situation, pod: KubeObject, row: MappingRow, instance: Instance
) -> list[Action]:
    """Give up on the code: fail the pod with the log's end on it, end the billing."""
    ref = PodRef.of(pod)
    summary = (
        f"the exit code of RunPod instance {instance.id} could not be read within "
        f"{int(tick.settings.timing.exit_code_timeout)} s of its stop"
    )
    tail = _log_tail(tick.obs.exit_logs.get(instance.id, ()))
    shown = f"{summary}; last log lines:\n{tail}" if tail else summary
    status = pod_status.pod_status(
        pod, None, exit_code=None, now=tick.now, reason=PodReason.EXIT_CODE_UNKNOWN, message=shown
    )
    # The row keeps the summary only: log lines may hold anything, and stay off the disk.
    failed = row.changed(
        state=MappingState.TERMINATING,
        reason=PodReason.EXIT_CODE_UNKNOWN,
        last_error=summary,
        status_hash=pod_status.status_fingerprint(status),
    )
    return [
        PatchStatus(ref, status, failed),
        Event(ref, PodReason.EXIT_CODE_UNKNOWN, summary, warning=True),
        Terminate(
            instance.id, TerminateReason.POD_FAILED, PodReason.EXIT_CODE_UNKNOWN.value, ref, failed
        ),
    ]


def _log_tail(lines: Sequence[str]) -> str:
    tail = "\n".join(lines[-LOG_TAIL_KEPT_LINES:])
    return tail.encode()[-LOG_TAIL_KEPT_BYTES:].decode("utf-8", "ignore")


def _mirror(tick: Situation, pod: KubeObject, row: MappingRow, instance: Instance) -> list[Action]:
    """Copy the instance's state onto the pod: status, annotations and the row."""
    key = pod_status.mirror_key(pod, instance, tick.now)
    mirrored = _mirrored_values(row, instance)
    if key is not None and key == row.mirror_key and _row_mirrored(row) == mirrored:
        # The inputs of the tick that left the pod mirrored: the outputs are the same
        # too. Not computing them is most of what a steady tick at scale saves.
        return []
    ref = PodRef.of(pod)
    status = pod_status.pod_status(pod, instance, exit_code=None, now=tick.now)
    fingerprint = pod_status.status_fingerprint(status)
    annotations = _annotations_to_patch(pod, instance)
    # No key while annotations wait for their patch, or one that failed would never
    # be retried. Otherwise the key is stored even when our own patches are about to
    # renew the resourceVersion: the next tick computes once more and stores the new one.
    new_row = row.changed(
        **dict(zip(_MIRRORED, mirrored, strict=True)),
        status_hash=fingerprint,
        mirror_key=None if annotations else key,
    )
    if fingerprint != row.status_hash:
        # One request for both: the status subresource takes the annotations along.
        # No Event says the pod started: the status does (phase, the container's
        # startedAt, the Ready condition), as a virtual kubelet's does; the Events
        # are for what only we know, the instance created and the instance deleted.
        return [PatchStatus(ref, status, new_row, annotations)]
    actions: list[Action] = tick.save(row, new_row)
    if annotations:
        actions.append(PatchMetadata(ref, annotations))
    return actions


_MIRRORED = (
    "last_instance_status",
    "cost_per_hr",
    "datacenter_id",
    "reason",
    "last_error",
    "orphan_sightings",
)
"""The row fields mirroring sets, besides the status fingerprint and the key."""
_row_mirrored = attrgetter(*_MIRRORED)
"""A row's `_MIRRORED` fields in one C call: this runs for every pod on every tick."""


def _mirrored_values(row: MappingRow, instance: Instance) -> tuple[object, ...]:
    """What mirroring sets in the `_MIRRORED` fields, in their order."""
    # `_value_`, the plain attribute behind `value`: no descriptor call per pod.
    return (
        instance.status._value_,
        instance.cost_per_hr,
        instance.datacenter_id or row.datacenter_id,
        None,
        None,
        0,
    )


def _annotations_to_patch(pod: KubeObject, instance: Instance) -> dict[str, str | None]:
    current = podinfo.pod_annotations(pod)
    wanted = pod_status.metadata_annotations(instance)
    return {key: value for key, value in wanted.items() if current.get(key) != value}


def _finish(tick: Situation, pod: KubeObject, row: MappingRow, instance: Instance) -> list[Action]:
    """A batch pod's process ended: record how, then release the instance."""
    ref = PodRef.of(pod)
    status = pod_status.pod_status(pod, instance, exit_code=row.exit_code, now=tick.now)
    done = row.changed(
        state=MappingState.TERMINATING,
        status_hash=pod_status.status_fingerprint(status),
        last_instance_status=instance.status.value,
    )
    outcome = "succeeded" if row.exit_code == 0 else f"failed (exit code {row.exit_code})"
    return [
        PatchStatus(ref, status, done),
        Event(ref, Notice.COMPLETED, f"process {outcome}", warning=row.exit_code != 0),
        Terminate(instance.id, TerminateReason.PROCESS_ENDED, f"pod {outcome}", ref, done),
    ]
