"""A model of the Job controller's pod tracking with the `batch.kubernetes.io/job-tracking`
finalizer (pkg/controller/job, Kubernetes 1.26 and later).

- A pod the Job controller creates carries the finalizer: here, any pod created with a
  controller `ownerReference` to an existing Job (tests stand in for the controller's
  create).
- The finalizer is removed, and the pod counted in the Job's status, once the pod is
  finished as the controller sees it (`canRemoveFinalizer`): Succeeded; or failed,
  which is phase Failed, or, unless the Job replaces only failed pods
  (`podReplacementPolicy: Failed` or a `podFailurePolicy`), a deletion timestamp on a
  pod that did not succeed; with a `podFailurePolicy`, only phase Failed. A pod whose
  Job is gone or finished loses the finalizer too.
- The Job's `status.succeeded`/`status.failed` count the pods, `Complete` is set when
  `completions` succeeded and `Failed` when more than `backoffLimit` failed.

So a deleted pod of a Job that replaces only failed pods stays Terminating until a
kubelet writes a terminal phase, as on a real cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.sim.kube_resources import JOBS, PODS, Resource

if TYPE_CHECKING:
    from reconciler.sim.kube_store import Store

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
MERGE_PATCH = "application/merge-patch+json"
_DEFAULT_BACKOFF_LIMIT = 6


class JobController:
    def __init__(self, store: Store) -> None:
        self.store = store

    def admit(self, resource: Resource, obj: dict[str, Any]) -> None:
        """On pod create: the finalizer on pods of an existing Job."""
        if resource is not PODS or self._job_of(obj) is None:
            return
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if TRACKING_FINALIZER not in finalizers:
            finalizers.append(TRACKING_FINALIZER)

    def react(self, resource: Resource, obj: dict[str, Any]) -> None:
        """After a pod write: drop the finalizer and count the pod once it is finished."""
        meta = obj["metadata"]
        if resource is not PODS or TRACKING_FINALIZER not in (meta.get("finalizers") or []):
            return
        job = self._job_of(obj)
        outcome = _outcome(obj, job)
        if job is not None and _finished(job):
            outcome = outcome or "uncounted"
        if outcome is None and job is not None:
            return
        remaining = [f for f in meta["finalizers"] if f != TRACKING_FINALIZER]
        namespace = meta.get("namespace", "")
        self.store.patch(
            PODS,
            namespace,
            meta["name"],
            MERGE_PATCH,
            {"metadata": {"finalizers": remaining or None}},
        )
        if job is not None and outcome in ("succeeded", "failed"):
            self._count(job, outcome)

    def _job_of(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        meta = pod["metadata"]
        for ref in meta.get("ownerReferences") or []:
            if (
                ref.get("kind") == "Job"
                and ref.get("controller")
                and str(ref.get("apiVersion", "")).startswith("batch/")
            ):
                entry = self.store.find(JOBS, meta.get("namespace"), ref.get("name", ""))
                if entry is not None and entry.obj["metadata"]["uid"] == ref.get("uid"):
                    return entry.obj
        return None

    def _count(self, job: dict[str, Any], outcome: str) -> None:
        spec, status = job.get("spec") or {}, dict(job.get("status") or {})
        status[outcome] = int(status.get(outcome) or 0) + 1
        now = self.store.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = list(status.get("conditions") or [])
        if not _finished(job):
            if status.get("succeeded", 0) >= int(spec.get("completions") or 1):
                conditions.append(
                    {
                        "type": "Complete",
                        "status": "True",
                        "lastProbeTime": now,
                        "lastTransitionTime": now,
                    }
                )
                status["completionTime"] = now
            elif status.get("failed", 0) > int(spec.get("backoffLimit", _DEFAULT_BACKOFF_LIMIT)):
                conditions.append(
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "lastProbeTime": now,
                        "lastTransitionTime": now,
                    }
                )
        status["conditions"] = conditions
        meta = job["metadata"]
        self.store.patch(
            JOBS, meta.get("namespace"), meta["name"], MERGE_PATCH, {"status": status}, "status"
        )


def _only_replaces_failed(job: dict[str, Any]) -> bool:
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or bool(spec.get("podFailurePolicy"))


def _outcome(pod: dict[str, Any], job: dict[str, Any] | None) -> str | None:
    """How the controller sees the pod now: succeeded, failed, or not finished (None)."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return "succeeded"
    if phase == "Failed":
        return "failed"
    if job is None or _only_replaces_failed(job):
        return None
    return "failed" if pod["metadata"].get("deletionTimestamp") else None


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )
