"""Which gang pods are their Job's: a pod joins a gang only if its controller
ownerReference is a Job of its own namespace with that UID (docs/architecture.md §3,
"Ids a tenant writes"). The ownerReference is anyone's to write who may make a pod, so
a pod of namespace A naming B's Job UID would otherwise join B's gang and end it.

A Job is proven by a cluster row of ours that records it, by a read of the Job the
reference names in the pod's namespace (its UID compared), or by such a read earlier in
this process (a UID is a Job's for good). A steady tick therefore reads nothing: one
Kubernetes GET per Job the first time it is seen without a row, and one per tick for a
reference that names no Job of its namespace, while such a pod stays. No RunPod request.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.core.cluster_row import ClusterRow
from reconciler.core.domain import KubeObject
from reconciler.core.resources import clusters
from reconciler.core.resources.clusters import GangJob

log = logging.getLogger(__name__)

_KEPT = 10_000
"""Jobs proven in this process that are remembered (the oldest are read again)."""


@dataclass(frozen=True)
class Sorted:
    """The node's gang pods sorted by whether their Job is proven theirs."""

    theirs: list[KubeObject] = field(default_factory=list)
    """Pods of a Job of their own namespace: the gangs."""
    foreign: list[KubeObject] = field(default_factory=list)
    """Pods whose ownerReference names no Job of their namespace (or none at all)."""
    unread: frozenset[str] = frozenset()
    """Job UIDs of pods whose Job could not be read this tick: nothing is decided of them."""


class GangJobs:
    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._proven: dict[GangJob, None] = {}

    def sort(self, pods: Sequence[KubeObject], rows: Sequence[ClusterRow]) -> Sorted:
        proven = clusters.jobs_recorded(rows)
        theirs: list[KubeObject] = []
        foreign: list[KubeObject] = []
        unread: set[str] = set()
        checked: dict[GangJob, bool | None] = {}
        for pod in pods:
            job = clusters.job_of(pod)
            if job is None:
                theirs.append(pod)  # no Job at all: the gangs' planning says why
                continue
            if job not in checked:
                checked[job] = True if job in proven else self._is_theirs(job, pod)
            verdict = checked[job]
            if verdict is None:
                unread.add(job[1])
            else:
                (theirs if verdict else foreign).append(pod)
        return Sorted(theirs, foreign, frozenset(unread))

    def _is_theirs(self, job: GangJob, pod: KubeObject) -> bool | None:
        """Whether the Job is its namespace's, read once per process; None: unreadable."""
        if job in self._proven:
            return True
        name = clusters.job_name(pod)
        if not name:
            return False
        try:
            read = self.kube.jobs.get(job[0], name)
        except kube_errors.KubeError as exc:
            log.warning("could not read the Job of gang pod %s: %s", pod["metadata"]["name"], exc)
            return None
        if read is None or read["metadata"].get("uid") != job[1]:
            return False
        if len(self._proven) >= _KEPT:
            self._proven.pop(next(iter(self._proven)))
        self._proven[job] = None
        return True
