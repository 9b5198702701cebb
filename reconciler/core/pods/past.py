"""What a live pod without an instance (and without a row, or a row that has yet to
create) was, before anything is created.

Such a pod may be new, or may have run on an instance whose writer's rows are lost (a
deleted database, a writer on a database of its own). A create then runs its work a
second time and bills it again, so the pod's own record comes first: the instance id
written onto it right after the create (`runpod.io/pod-id`), and the status mirrored
onto it while that instance ran. Only a pod that shows neither is new.
"""

from __future__ import annotations

from datetime import datetime

from reconciler.core.actions import PodRef
from reconciler.core.domain import KubeObject
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.pods import podinfo
from reconciler.core.pods.ownership import Ownership, annotated_instance

RAN_UNRECORDED = (
    "this pod's status shows it ran, but neither a RunPod instance, our records nor its "
    "runpod.io/pod-id annotation say where; not running its work a second time"
)


def rebuilt_row(pod: KubeObject, now: datetime, owners: Ownership) -> MappingRow | None:
    """The row of the instance the pod's runpod.io/pod-id names, after our rows were lost
    or while ours still waits to create and another writer made it (only an id that may
    make a row: `ownership.annotated_instance`).

    The row gets a fresh grace period: the instance may only be lagging in the list.
    """
    instance_id = annotated_instance(owners, pod)
    if instance_id is None:
        return None
    ref = PodRef.of(pod)
    return MappingRow(
        ref.uid,
        ref.namespace,
        ref.name,
        MappingState.RUNNING,
        now,
        now,
        instance_id=instance_id,
        attempt_started_at=now,
    )


def has_past(pod: KubeObject, owners: Ownership) -> bool:
    """Whether the pod shows it had an instance: then it is never created for again. An
    annotation that no row could hold (not an id RunPod gives, or one another pod or row
    names) or that names what is not this pod's (`Ownership.refused`) is anyone's
    writing, not a past; one naming an id no read showed yet holds the pod until one
    does."""
    uid = podinfo.uid(pod)
    return annotated_instance(owners, pod) is not None or uid in owners.unread or ran_before(pod)


def ran_before(pod: KubeObject) -> bool:
    """Whether the pod's status says a process of it started: only a kubelet (we, for
    the virtual node) writes that, and only from an instance it saw running."""
    if podinfo.phase(pod) == "Running":
        return True
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    return any(
        "running" in (s.get("state") or {}) or "terminated" in (s.get("state") or {})
        for s in statuses
    )
