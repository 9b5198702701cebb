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

Indexed Jobs (`completionMode: Indexed`, which needs `completions`) have their pods made
here, as `manageJob` makes them: one pod per index in [0, completions) that has neither
succeeded nor an active pod, up to `parallelism` active, each a copy of the template with
the index as annotation and label `batch.kubernetes.io/job-completion-index`, hostname
`<job>-<index>`, generateName `<job>-<index>-` (the Job's name cut so that it fits
`podGenerateNameWithIndex`), `JOB_COMPLETION_INDEX` in every container's env from the
label (as the Job controller writes it since 1.28), the Job's labels, and a controller
reference to the Job. A failed index gets
a new pod until the Job fails; a Job that fails has its active pods deleted. Completions
are counted per index (`status.completedIndexes` as "0-2,5", `status.succeeded` the
number of indexes); the Job is Complete once every index succeeded. NonIndexed Jobs'
pods are still made by the tests, standing in for the controller.

Deleting a Job with `propagationPolicy` Background or Foreground deletes its pods, as the
garbage collector does (Foreground is not held back for them here); without a policy a
batch/v1 Job orphans them, as its default is.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from reconciler.sim.kube_resources import JOBS, PODS, Resource
from reconciler.sim.kube_select import Selector

if TYPE_CHECKING:
    from reconciler.sim.kube_store import Store

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
MERGE_PATCH = "application/merge-patch+json"
_DEFAULT_BACKOFF_LIMIT = 6
# names.MaxGeneratedNameLength: a generateName prefix leaves 5 characters for the suffix.
_MAX_GENERATED_NAME = 58


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
        """After a pod write: drop the finalizer and count the pod once it is finished.
        After a Job write: make the pods an Indexed Job lacks."""
        if resource is JOBS:
            self._manage(obj)
            return
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
            self._count(job, outcome, obj)
            counted = self.store.find(JOBS, namespace, job["metadata"]["name"])
            if counted is not None:
                self._manage(counted.obj)

    def delete_dependents(self, job: dict[str, Any]) -> None:
        """The garbage collector's part of a cascading delete: the Job's pods go too."""
        for pod in self._pods_of(job):
            meta = pod["metadata"]
            if "deletionTimestamp" not in meta:
                self.store.delete(PODS, meta["namespace"], meta["name"])

    def _manage(self, job: dict[str, Any]) -> None:
        """Indexed Jobs: make a pod for each missing index (within parallelism); delete
        the active pods of a Job that failed."""
        spec = job.get("spec") or {}
        if spec.get("completionMode") != "Indexed" or "deletionTimestamp" in job["metadata"]:
            return
        pods = self._pods_of(job)
        active = [pod for pod in pods if _active(pod)]
        if _finished(job):
            for pod in active:
                meta = pod["metadata"]
                self.store.delete(PODS, meta["namespace"], meta["name"])
            return
        done = _parse_indexes((job.get("status") or {}).get("completedIndexes") or "")
        busy = {_index_of(pod) for pod in active}
        room = int(spec.get("parallelism", 1)) - len(active)
        for index in _missing(int(spec["completions"]), {*done, *busy}, room):
            self.store.create(PODS, job["metadata"]["namespace"], _indexed_pod(job, index))

    def _pods_of(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        uid = job["metadata"]["uid"]
        page = self.store.list_page(PODS, job["metadata"]["namespace"], Selector())
        return [
            entry.obj
            for entry in page.items
            if any(
                ref.get("uid") == uid and ref.get("controller")
                for ref in entry.obj["metadata"].get("ownerReferences") or []
            )
        ]

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

    def _count(self, job: dict[str, Any], outcome: str, pod: dict[str, Any]) -> None:
        spec, status = job.get("spec") or {}, dict(job.get("status") or {})
        status[outcome] = int(status.get(outcome) or 0) + 1
        if spec.get("completionMode") == "Indexed" and outcome == "succeeded":
            done = _parse_indexes(status.get("completedIndexes") or "")
            index = _index_of(pod)
            if index is not None and index < int(spec["completions"]):
                done.add(index)
            status["completedIndexes"] = _format_indexes(done)
            status["succeeded"] = len(done)
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


def _active(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and "deletionTimestamp" not in pod["metadata"]


def _index_of(pod: dict[str, Any]) -> int | None:
    text = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX, "")
    return int(text) if text.isdigit() else None


def _indexed_pod(job: dict[str, Any], index: int) -> dict[str, Any]:
    """The pod `manageJob` makes for one index of an Indexed Job."""
    meta, template = job["metadata"], copy.deepcopy(job["spec"]["template"])
    name = meta["name"]
    pod_meta = template.get("metadata") or {}
    pod_meta.pop("name", None)
    labels = {**(pod_meta.get("labels") or {}), COMPLETION_INDEX: str(index)}
    # The labels the API server puts on a Job's template (its generated selector).
    for key in ("batch.kubernetes.io/controller-uid", "controller-uid"):
        labels.setdefault(key, meta["uid"])
    for key in ("batch.kubernetes.io/job-name", "job-name"):
        labels.setdefault(key, name)
    suffix = f"-{index}-"
    prefix = name + suffix
    if len(prefix) > _MAX_GENERATED_NAME:
        prefix = prefix[: _MAX_GENERATED_NAME - len(suffix)] + suffix
    pod_meta.update(
        namespace=meta["namespace"],
        labels=labels,
        annotations={**(pod_meta.get("annotations") or {}), COMPLETION_INDEX: str(index)},
        generateName=prefix,
        ownerReferences=[
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": name,
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    spec = template.get("spec") or {}
    spec["hostname"] = f"{name}-{index}"
    for container in (*spec.get("initContainers", []), *spec.get("containers", [])):
        env = container.setdefault("env", [])
        if not any(var.get("name") == COMPLETION_INDEX_ENV for var in env):
            path = f"metadata.labels['{COMPLETION_INDEX}']"
            field = {"apiVersion": "v1", "fieldPath": path}
            env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": field}})
    return {"metadata": pod_meta, "spec": spec}


def _missing(completions: int, taken: set[int | None], room: int) -> list[int]:
    """The first `room` indexes below `completions` that no pod holds or completed,
    found lazily as the real controller walks its intervals: `completions` may be 10^9."""
    found: list[int] = []
    index = 0
    while len(found) < room and index < completions:
        if index not in taken:
            found.append(index)
        index += 1
    return found


def _parse_indexes(text: str) -> set[int]:
    indexes: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        indexes.update(range(int(low), int(high or low) + 1))
    return indexes


def _format_indexes(indexes: set[int]) -> str:
    """Intervals as the Job controller writes them: "0-2,5"."""
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)
