"""One pod UID's step: its pod, its row and its owned instances brought one step
closer to agreement (docs/architecture.md §2 to §4).
"""

from __future__ import annotations

from reconciler.core.actions import (
    Action,
    DeleteRow,
    Event,
    FinalizePod,
    PatchStatus,
    PodRef,
    SaveRow,
    Terminate,
)
from reconciler.core.domain import (
    Instance,
    InstanceStatus,
    KubeObject,
)
from reconciler.core.mapping import MappingRow, MappingState, replacing_start
from reconciler.core.plan import starts
from reconciler.core.plan.admission import Waiting, prepare_create
from reconciler.core.plan.outcomes import cannot_create, fail_pod
from reconciler.core.plan.running import adopted_row, with_instance
from reconciler.core.plan.situation import Situation, ownership_of
from reconciler.core.pods import past as pod_past
from reconciler.core.pods import podinfo
from reconciler.core.reasons import Notice, PodReason, TerminateReason
from reconciler.core.translate import status as pod_status

ORPHAN_DETAIL = "orphan: its pod is gone"
# Row states in which no instance of ours is recorded for the pod yet.
_BEFORE_AN_INSTANCE = (MappingState.PENDING, MappingState.CREATING)


def decide(
    tick: Situation,
    uid: str,
    pod: KubeObject | None,
    row: MappingRow | None,
    instances: list[Instance],
) -> tuple[list[Action], Waiting | None]:
    keep, extras = _split_duplicates(tick, instances, row, pod)
    # No comprehension for none: it is a call, and this runs per pod, per tick.
    actions: list[Action] = [_terminate_duplicate(pod, e) for e in extras] if extras else []
    if pod is None:
        return actions + _without_pod(tick, row, keep), None
    if podinfo.is_deleting(pod):
        return actions + _deleting(tick, pod, row, keep), None
    if podinfo.is_finished(pod):
        return actions + _finished(tick, pod, row, keep), None
    if keep is not None:
        return actions + with_instance(tick, pod, row, keep), None
    decided, wait = _without_instance(tick, pod, row)
    return actions + decided, wait


def _split_duplicates(
    tick: Situation, instances: list[Instance], row: MappingRow | None, pod: KubeObject | None
) -> tuple[Instance | None, list[Instance]]:
    """The instance to keep and the duplicates to terminate now.

    Keep the one the pod's runpod.io/pod-id names (every writer reads the same pod, so
    writers with different databases agree), else the mapped one, else the oldest. A
    duplicate younger than the create grace may be another writer's create it has yet to
    record: it is left alone until the grace is over (docs/architecture.md §4, Duplicates heal).
    """
    if len(instances) < 2:
        return (instances[0] if instances else None), []
    named = podinfo.pod_annotations(pod).get(podinfo.POD_ID_ANNOTATION) if pod else None
    mapped = row.instance_id if row is not None else None
    ordered = sorted(instances, key=lambda i: (i.id != named, i.id != mapped, _age_key(i)))
    extras = [
        i
        for i in ordered[1:]
        if not tick.within(i.created_at, tick.settings.timing.create_grace_time)
    ]
    return ordered[0], extras


def _age_key(instance: Instance) -> tuple[str, str]:
    return (instance.created_at.isoformat() if instance.created_at else "", instance.id)


def _terminate_duplicate(pod: KubeObject | None, extra: Instance) -> Action:
    ref = PodRef.of(pod) if pod is not None else None
    return Terminate(extra.id, TerminateReason.DUPLICATE, "duplicate instance for one pod", ref)


def _without_pod(
    tick: Situation, row: MappingRow | None, instance: Instance | None
) -> list[Action]:
    if instance is not None:
        return _orphan(tick, row, instance)
    if row is None:
        return []
    if row.state is MappingState.CREATING and tick.within(
        row.attempt_started_at, tick.settings.timing.create_grace_time
    ):
        return []  # an in-doubt create may still show up; it is an orphan then
    if not row.state.finished:
        return tick.save(row, _ended(tick, row))
    # Kept for `reconciler cost` and the leak audit as long as --cost-history says.
    if not tick.within(
        row.ended_at or row.updated_at, tick.settings.caps.cost_history_days * 86400
    ):
        return [DeleteRow(row.pod_uid)]
    return []


def _ended(tick: Situation, row: MappingRow) -> MappingRow:
    return row.changed(
        state=MappingState.TERMINATED,
        last_instance_status="TERMINATED",
        ended_at=row.ended_at or tick.now,
    )


def _orphan(tick: Situation, row: MappingRow | None, instance: Instance) -> list[Action]:
    """An owned instance whose pod is gone: terminated on its second sighting, once old."""
    if row is None:
        row = MappingRow(
            instance.pod_uid or instance.id,
            "",
            instance.name,
            MappingState.RUNNING,
            tick.now,
            tick.now,
            instance_id=instance.id,
        )
    if row.state is MappingState.TERMINATING:
        return [Terminate(instance.id, TerminateReason.ORPHAN, ORPHAN_DETAIL, None, row)]
    sightings = row.orphan_sightings + 1
    old_enough = not tick.within(instance.created_at, tick.settings.timing.orphan_grace_time)
    if sightings >= 2 and old_enough:
        return [
            Terminate(
                instance.id,
                TerminateReason.ORPHAN,
                ORPHAN_DETAIL,
                None,
                row.changed(state=MappingState.TERMINATING, orphan_sightings=sightings),
            )
        ]
    return tick.save(None, row.changed(orphan_sightings=sightings))


def _deleting(
    tick: Situation, pod: KubeObject, row: MappingRow | None, instance: Instance | None
) -> list[Action]:
    """A pod being deleted is finished like a kubelet would: the instance is terminated
    and confirmed gone, then the pod gets a terminal phase, then the object is deleted.

    The phase comes only once the instance is gone: a Job that replaces only failed
    pods starts the replacement on that phase, and must not run two at once.
    """
    ref = PodRef.of(pod)
    if instance is not None:
        return _terminate(tick, ref, row, instance, TerminateReason.POD_DELETED, "pod deleted")
    if (
        row is not None
        and row.state is MappingState.CREATING
        and tick.within(row.attempt_started_at, tick.settings.timing.create_grace_time)
    ):
        return []  # wait: the in-doubt create must be found and terminated first
    done = _ended(tick, row) if row is not None else None
    status = pod_status.deleted_status(
        pod,
        row.instance_id if row else None,
        exit_code=row.exit_code if row else None,
        now=tick.now,
    )
    if status is None and podinfo.deletion_is_immediate(pod):
        # Terminal and deleted at once already: finalizers of others hold the object.
        return tick.save(row, done) if row is not None and done is not None else []
    return [FinalizePod(ref, done, status)]


def _finished(
    tick: Situation, pod: KubeObject, row: MappingRow | None, instance: Instance | None
) -> list[Action]:
    if instance is not None:
        return _terminate(
            tick,
            PodRef.of(pod),
            row,
            instance,
            TerminateReason.POD_ENDED,
            f"pod {podinfo.phase(pod)}",
        )
    if row is not None and not row.state.finished:
        return tick.save(row, _ended(tick, row))
    return []


def _terminate(
    tick: Situation,
    ref: PodRef,
    row: MappingRow | None,
    instance: Instance,
    reason: TerminateReason,
    why: str,
) -> list[Action]:
    row = row or adopted_row(tick, ref, instance)
    first = row.state is not MappingState.TERMINATING
    actions: list[Action] = [
        Terminate(instance.id, reason, why, ref, row.changed(state=MappingState.TERMINATING))
    ]
    if first:
        actions.append(
            Event(
                ref,
                Notice.TERMINATING_INSTANCE,
                f"terminating RunPod instance {instance.id}: {why}",
            )
        )
    return actions


def _without_instance(
    tick: Situation, pod: KubeObject, row: MappingRow | None
) -> tuple[list[Action], Waiting | None]:
    if row is None or row.state in _BEFORE_AN_INSTANCE:
        # Our row may still wait (a create refused, or one in doubt) while another writer,
        # on a database of its own, made the instance and wrote it onto the pod: RunPod's
        # list may not show it yet, and a create now would pay twice.
        owners = ownership_of(tick.obs, tick.settings.owner_id)
        rebuilt = pod_past.rebuilt_row(pod, tick.now, owners)
        if rebuilt is not None:
            return [SaveRow(rebuilt)], None
        refused = owners.refused.get(podinfo.uid(pod))
        if refused is not None and row is None:  # told once: a row follows this tick
            decided, wait = _new_pod(tick, pod, row)
            return [_refused_id(pod, refused), *decided], wait
    return _new_pod(tick, pod, row)


def _refused_id(pod: KubeObject, why: str) -> Event:
    message = (
        f"annotation {podinfo.POD_ID_ANNOTATION} names no instance of this pod: {why}; "
        "nothing of it is read or changed, and no row is made from it"
    )
    return Event(PodRef.of(pod), PodReason.FOREIGN_ID, message, warning=True)


def _new_pod(
    tick: Situation, pod: KubeObject, row: MappingRow | None
) -> tuple[list[Action], Waiting | None]:
    """A pod without an instance whose annotation rebuilt no row."""
    if row is not None and replacing_start(row):
        # The instance that failed to start is gone: the pod waits for its next one.
        pending = starts.waiting_again(row)
        actions, wait = prepare_create(tick, pod, pending)
        return [SaveRow(pending), *actions], wait
    if row is not None and (row.state.finished or row.state is MappingState.TERMINATING):
        return _restore_final_status(tick, pod, row), None
    if row is not None and row.state is MappingState.RUNNING:
        return _instance_missing(tick, pod, row), None
    if (
        row is not None
        and row.state is MappingState.CREATING
        and tick.within(row.attempt_started_at, tick.settings.timing.create_grace_time)
    ):
        return [], None  # in doubt: the instance may still appear in the list
    if podinfo.deadline_passed(pod, tick.now):
        return fail_pod(
            tick,
            pod,
            row,
            None,
            PodReason.DEADLINE_EXCEEDED,
            "pod waited longer than spec.activeDeadlineSeconds",
        ), None
    lookalike = tick.lookalikes.get(podinfo.uid(pod))
    if lookalike is not None:
        # Probably this pod's own instance, its tags and our records lost: a create
        # would pay twice. It is never touched either; a person decides.
        return cannot_create(
            tick,
            pod,
            row,
            PodReason.UNOWNED_LOOKALIKE,
            (
                f"RunPod instance {lookalike} is named like this pod's but carries no owner tag "
                "and nothing of ours records it; not creating another. Delete it, or put the "
                "tags back, to go on"
            ),
            False,
        ), None
    if row is None and pod_past.ran_before(pod):
        return fail_pod(
            tick, pod, None, None, PodReason.INSTANCE_LOST, pod_past.RAN_UNRECORDED
        ), None
    return prepare_create(tick, pod, row)


def _restore_final_status(tick: Situation, pod: KubeObject, row: MappingRow) -> list[Action]:
    """Finished work never runs again; make sure the pod shows how it ended."""
    final = row.changed(
        state=MappingState.FAILED if row.reason else MappingState.TERMINATED,
        ended_at=row.ended_at or tick.now,
    )
    if row.exit_code is not None:
        ended = Instance(row.instance_id or "", row.instance_name or "", InstanceStatus.EXITED)
        status = pod_status.pod_status(pod, ended, exit_code=row.exit_code, now=tick.now)
    else:
        reason = row.reason or PodReason.INSTANCE_LOST
        status = pod_status.pod_status(
            pod,
            None,
            exit_code=None,
            now=tick.now,
            reason=reason,
            message=row.last_error or "the RunPod instance is gone",
        )
    fingerprint = pod_status.status_fingerprint(status)
    final = final.changed(status_hash=fingerprint)
    if fingerprint != row.status_hash:
        return [PatchStatus(PodRef.of(pod), status, final)]
    return tick.save(row, final)


def _instance_missing(tick: Situation, pod: KubeObject, row: MappingRow) -> list[Action]:
    if tick.within(row.attempt_started_at, tick.settings.timing.create_grace_time):
        return []  # a new instance can lag behind in the list
    shown = next((i for i in tick.obs.instances if i.id == row.instance_id), None)
    why = (
        "disappeared while the pod was running"
        if shown is None or shown.status is InstanceStatus.TERMINATED
        else "carries another owner's tags in RunPod's own record: not ours, left alone"
    )
    return fail_pod(
        tick, pod, row, None, PodReason.INSTANCE_LOST, f"RunPod instance {row.instance_id} {why}"
    )
