"""DaemonSet pods that land on the virtual node: never run, and told why once.

A DaemonSet whose pods tolerate every taint (`operator: Exists` without a key, as many
log and monitoring agents do) gets a pod on every node, the virtual one included. Such a
pod would run a node agent on a rented GPU, so it never gets an instance. It stays
Pending (failing it would make the DaemonSet controller delete and recreate it, a loop),
and says why: a Warning Event and the reason on the pod (its Ready condition and
`kubectl get pod`'s STATUS), written once. The pod's own status is the memory: a pod
that already shows the reason gets nothing more, so no tick patches it again.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import datetime

from reconciler.core.actions import Action, Event, PatchStatus, PodRef
from reconciler.core.domain import KubeObject
from reconciler.core.pods import podinfo
from reconciler.core.reasons import PodReason
from reconciler.core.translate import status as pod_status

NOT_RUN = PodReason.DAEMON_SET_POD_NOT_RUN
MESSAGE = (
    "the virtual node runs no DaemonSet pods (a node agent has no node here); keep "
    "this DaemonSet off it with node affinity on the label type NotIn "
    "[virtual-kubelet], or do not tolerate the taint virtual-kubelet.io/provider"
)


def notices(daemon_pods: Iterable[KubeObject], now: datetime) -> list[Action]:
    actions: list[Action] = []
    for pod in daemon_pods:
        if podinfo.is_finished(pod) or podinfo.is_deleting(pod) or _told(pod):
            continue
        ref = PodRef.of(pod)
        actions += [
            Event(ref, NOT_RUN, MESSAGE, warning=True),
            PatchStatus(ref, _not_run_status(pod, now), None),
        ]
    return actions


def _told(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("reason") == NOT_RUN


def _not_run_status(pod: KubeObject, now: datetime) -> KubeObject:
    status = copy.deepcopy(
        pod_status.pod_status(
            pod, None, exit_code=None, now=now, reason=NOT_RUN, message=MESSAGE, pending=True
        )
    )
    status.update(reason=NOT_RUN, message=MESSAGE)
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            condition.update(reason=NOT_RUN, message=MESSAGE)
    return status
