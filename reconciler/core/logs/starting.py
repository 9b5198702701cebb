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
    """The live pods whose mapped instance is starting, oldest row first."""
    by_id = {instance.id: instance for instance in instances}
    live = {podinfo.uid(pod): pod for pod in pods if not podinfo.is_deleting(pod)}
    found = []
    for row in sorted(rows, key=lambda r: r.created_at):
        instance = by_id.get(row.instance_id or "")
        pod = live.get(row.pod_uid)
        if row.state is MappingState.RUNNING and instance and pod and is_starting(instance):
            found.append(Starting(PodRef.of(pod), instance.id))
    return found
