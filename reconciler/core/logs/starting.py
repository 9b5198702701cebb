"""Which pods' instances are starting: where RunPod's own log lines (image pull, start-up,
errors) are worth reading while they happen, to show them as Events on the pod.

An instance is starting from its create until its container really runs: PROVISIONING,
STARTING, or RUNNING without a runtime (the pod is Pending, ContainerCreating). Once it
runs, or ends, its system lines are read with its last lines when it ends, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.core.actions import PodRef
from reconciler.core.domain import Instance, InstanceStatus, KubeObject
from reconciler.core.mapping import MappingRecord, MappingState
from reconciler.core.pods import facts as podinfo


@dataclass(frozen=True)
class Starting:
    pod: PodRef
    instance_id: str


def is_starting(instance: Instance) -> bool:
    if instance.status in (InstanceStatus.PROVISIONING, InstanceStatus.STARTING):
        return True
    return instance.status is InstanceStatus.RUNNING and instance.runtime is None


def starting(
    pods: Sequence[KubeObject], instances: Sequence[Instance], rows: Sequence[MappingRecord]
) -> list[Starting]:
    """The live pods whose mapped instance is starting, oldest row first.

    Read from the instances' side: a steady node has none starting, and its pods and
    rows are then not walked at all (this runs twice a tick)."""
    by_id = {instance.id: instance for instance in instances if is_starting(instance)}
    if not by_id:
        return []
    rows = [r for r in rows if r.instance_id in by_id and r.state is MappingState.RUNNING]
    uids = {row.pod_uid for row in rows}
    live = {
        uid: pod
        for pod in pods
        if (uid := podinfo.uid(pod)) in uids and not podinfo.is_deleting(pod)
    }
    found = []
    for row in sorted(rows, key=lambda r: r.created_at):
        pod = live.get(row.pod_uid)
        if pod is not None:
            found.append(Starting(PodRef.of(pod), by_id[row.instance_id or ""].id))
    return found
