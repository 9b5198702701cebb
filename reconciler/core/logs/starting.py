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
from reconciler.core.capacity.starts import is_starting
from reconciler.core.domain import Instance, InstanceStatus, KubeObject
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.pods import podinfo

CONTAINER_CREATING = "ContainerCreating"


@dataclass(frozen=True)
class Starting:
    pod: PodRef
    instance_id: str


def waits_for(instance: Instance) -> str:
    """What a starting instance waits for, in words for kubectl (as a kubelet says
    "container not running" with the container's waiting reason)."""
    if instance.status is InstanceStatus.PROVISIONING:
        return "RunPod is finding it a machine"
    if instance.status is InstanceStatus.STARTING:
        return "RunPod is pulling its image and starting its container"
    return "its container is starting and RunPod publishes no ports yet"


def starting_message(container: str, pod: str, instance: Instance) -> str:
    """The answer to exec, cp, port-forward or a log read on a pod whose instance is
    starting: wait, nothing is wrong with it (yet)."""
    return (
        f'container "{container}" in pod "{pod}" is not running yet: ContainerCreating '
        f"(RunPod instance {instance.id} is {instance.status.value}: {waits_for(instance)}); "
        "try again once the pod is Running"
    )


def waiting_message(pod: KubeObject, container: str) -> str | None:
    """The waiting message the tick wrote on the container's status while its instance
    starts (`ContainerCreating`), or None when it is not waiting so. Only chooses the
    words of a refusal: nothing is decided on it."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") != container:
            continue
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") == CONTAINER_CREATING:
            return str(waiting.get("message") or "its RunPod instance is starting")
    return None


def starting(
    pods: Sequence[KubeObject], instances: Sequence[Instance], rows: Sequence[MappingRow]
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
