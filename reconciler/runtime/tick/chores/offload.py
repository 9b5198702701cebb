"""Offload's reads (`core/pods/offload.py`): the pending pods no node took, each with its
Job, and the Node's cordon and taints when new work may start (none in a steady tick)."""

from __future__ import annotations

import logging

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.core.domain import KubeObject
from reconciler.core.plan.observation import Observed
from reconciler.core.pods import podinfo
from reconciler.core.pods.offload import PendingPod, has_candidates
from reconciler.runtime.tick.chores.base import Chore
from reconciler.runtime.tick.resources.base import Sighting

log = logging.getLogger(__name__)


class OffloadReads(Chore):
    def __init__(self, kube: KubeClient, node_name: str) -> None:
        self.kube, self.node_name = kube, node_name

    def observe(self, sighting: Sighting) -> Observed:
        pending = self._unscheduled_pods()
        # Cordon and taints matter only to new work: no read in a steady tick.
        wants_node = sighting.wants_node or has_candidates(pending)
        node = self.kube.node.read(self.node_name) if wants_node else None
        return Observed(pending=pending, node=node)

    def _unscheduled_pods(self) -> list[PendingPod]:
        """Pending pods without a node, each with its Job (one GET per Job), to offload."""
        jobs: dict[tuple[str, str], KubeObject | None] = {}
        pending = []
        for pod in self.kube.pods.list_pending():
            if not (podinfo.is_ours_to_run(pod) or podinfo.asks_for_cluster(pod)):
                continue
            key = (pod["metadata"].get("namespace", ""), _job_owner_uid(pod))
            try:
                if key[1] and key not in jobs:
                    jobs[key] = self.kube.jobs.owning(pod)
            except kube_errors.KubeError as exc:
                log.warning(
                    "could not read the Job of %s/%s: %s", key[0], pod["metadata"]["name"], exc
                )
                continue
            pending.append(PendingPod(pod, jobs.get(key)))
        return pending


def _job_owner_uid(pod: KubeObject) -> str:
    """The UID of the Job the pod names as its owner, or ""."""
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == "Job":
            return str(ref.get("uid", ""))
    return ""
