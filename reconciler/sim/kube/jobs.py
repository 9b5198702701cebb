"""A model of the Job controller (pkg/controller/job, Kubernetes v1.37): the only maker
of a Job's pods, with the `batch.kubernetes.io/job-tracking` finalizer.

Each write of a Job or of one of its pods runs the Job's sync (`syncJob`), again until
it writes nothing (the store wakes no controller from within one of its own writes):

- `status.startTime` on the first sync of a Job that is not suspended.
- Tracking (`trackJobStatusAndRemoveFinalizers`): a pod the controller made carries the
  finalizer (here: any pod created with a controller `ownerReference` to an existing
  Job). It is removed, and the pod counted once in `succeeded`/`failed`, once the pod is
  finished as the controller sees it (`canRemoveFinalizer`): Succeeded; or failed,
  which is phase Failed, or, unless the Job replaces only failed pods
  (`podReplacementPolicy: Failed` or a `podFailurePolicy`), a deletion timestamp on a
  pod that did not succeed; with a `podFailurePolicy`, only phase Failed. A pod whose
  Job is gone or finished loses the finalizer too.
- The end: more than `backoffLimit` (default 6) failed: the interim `FailureTarget`
  (BackoffLimitExceeded), the active pods deleted, then `Failed` once none is
  terminating. `completions` succeeded (a work queue without completions: one succeeded)
  and none active: `SuccessCriteriaMet` (CompletionsReached), then `Complete` and
  `completionTime`. Both conditions stay, as v1.37 leaves them.
- Otherwise `manageJob`: NonIndexed Jobs want `min(completions - succeeded,
  parallelism)` active (a work queue: `parallelism` until one succeeded, then no new
  pod); extra active pods are deleted (unscheduled, Pending, not ready, newest first),
  missing ones made from the template with generateName `<job>-` (less the pods still
  terminating when the Job replaces only failed pods). Indexed Jobs (`completionMode:
  Indexed`, which needs `completions`): one pod per index in [0, completions) that has
  neither succeeded nor an active pod, up to `parallelism` active, with the index as
  annotation and label `batch.kubernetes.io/job-completion-index`, hostname
  `<job>-<index>`, generateName `<job>-<index>-` (the Job's name cut so that it fits
  `podGenerateNameWithIndex`), `JOB_COMPLETION_INDEX` in every container's env from the
  label (as the Job controller writes it since 1.28). Completions are counted per index
  (`status.completedIndexes` as "0-2,5", `status.succeeded` the number of indexes).
- Every pod made gets the template's labels plus the selector's the API server puts on
  a Job's template (`batch.kubernetes.io/controller-uid`, `controller-uid`,
  `batch.kubernetes.io/job-name`, `job-name`) and a controller reference with
  `blockOwnerDeletion`. `status.active`, `ready` (active pods with Ready True) and
  `terminating` follow the pods.
- Not modelled: the backoff delay before a failed pod is replaced (10 s doubling, at
  most 6 min: here at once), `activeDeadlineSeconds`, `suspend` beyond "no pods, no
  startTime", `backoffLimitPerIndex`, `successPolicy`, pod failure policy actions, and
  Events (a pod the API refuses is simply not made, tried again on the next sync).

So a deleted pod of a Job that replaces only failed pods stays Terminating until a
kubelet writes a terminal phase, as on a real cluster.

Deleting a Job with `propagationPolicy` Background or Foreground deletes its pods, as the
garbage collector does (Foreground is not held back for them here); without a policy a
batch/v1 Job orphans them, as its default is.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from reconciler.sim.kube.resources import JOBS, PODS, Resource
from reconciler.sim.kube.select import Selector
from reconciler.sim.kube.status import ApiError

if TYPE_CHECKING:
    from reconciler.sim.kube.store import Store

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
MERGE_PATCH = "application/merge-patch+json"
_DEFAULT_BACKOFF = 6
_INTERIM = ("FailureTarget", "SuccessCriteriaMet")
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
        """After a Job write, or a write of one of its pods: the Job's sync. A pod whose
        Job is gone loses the finalizer."""
        if resource is JOBS:
            self._sync(obj)
            return
        if resource is not PODS:
            return
        job = self._job_of(obj)
        if job is not None:
            self._sync(job)
        elif TRACKING_FINALIZER in (obj["metadata"].get("finalizers") or []):
            self._drop_finalizer(obj)

    def delete_dependents(self, job: dict[str, Any]) -> None:
        """The garbage collector's part of a cascading delete: the Job's pods go too."""
        for pod in self._pods_of(job):
            meta = pod["metadata"]
            if "deletionTimestamp" not in meta:
                self.store.delete(PODS, meta["namespace"], meta["name"])

    def _sync(self, job: dict[str, Any]) -> None:
        """`syncJob`, until nothing changes: the controller's own writes do not wake it
        (the store calls no reaction from within one), so it goes on by itself."""
        meta = job["metadata"]
        for _ in range(8):
            entry = self.store.find(JOBS, meta["namespace"], meta["name"])
            if entry is None or entry.obj["metadata"]["uid"] != meta["uid"]:
                return
            if "deletionTimestamp" in entry.obj["metadata"] or not self._sync_once(entry.obj):
                return

    def _sync_once(self, job: dict[str, Any]) -> bool:
        """One pass of `syncJob` (pkg/controller/job/job_controller.go): count the finished
        pods and drop their finalizers, judge the end (FailureTarget then Failed past
        `backoffLimit`; SuccessCriteriaMet then Complete once `completions` succeeded and
        nothing runs), else make or delete pods for the wanted number active (`manageJob`).
        Whether it wrote anything."""
        spec, status = job.get("spec") or {}, copy.deepcopy(job.get("status") or {})
        now = self.store.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        if "startTime" not in status and not spec.get("suspend"):
            status["startTime"] = now
        pods = self._pods_of(job)
        wrote = self._track(job, pods, status)
        if wrote:
            pods = self._pods_of(job)
        active = [pod for pod in pods if _active(pod)]
        conditions = list(status.get("conditions") or [])
        ending = _interim(conditions)
        failed = int(status.get("failed") or 0)
        if (
            ending is None
            and not _finished(job)
            and failed > int(spec.get("backoffLimit", _DEFAULT_BACKOFF))
        ):
            ending = _condition(
                "FailureTarget",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            )
            conditions.append(ending)
        if _finished(job) or (ending is not None and ending["type"] == "FailureTarget"):
            wrote = self._delete(active) or wrote
            active = []
        elif ending is None and not spec.get("suspend"):
            wrote = self._manage(job, active, status) or wrote
            active = [pod for pod in self._pods_of(job) if _active(pod)]
        if ending is None and not _finished(job) and _complete(spec, status, active):
            ending = _condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
                now,
            )
            conditions.append(ending)
        terminating = [pod for pod in self._pods_of(job) if _terminating(pod)]
        if ending is not None and not _finished(job) and not terminating:
            final = "Failed" if ending["type"] == "FailureTarget" else "Complete"
            conditions.append(_condition(final, ending["reason"], ending["message"], now))
            if final == "Complete":
                status["completionTime"] = now
        status.update(
            uncountedTerminatedPods=status.get("uncountedTerminatedPods") or {},
            conditions=conditions,
            active=len(active),
            ready=sum(1 for pod in active if _ready(pod)),
            terminating=len(terminating),
        )
        for zero in ("active", "conditions"):  # omitempty
            if not status[zero]:
                del status[zero]
        old = job.get("status") or {}
        if status == old:
            return wrote
        gone = {key: None for key in old if key not in status}  # a merge patch's removal
        meta = job["metadata"]
        self.store.patch(
            JOBS,
            meta["namespace"],
            meta["name"],
            MERGE_PATCH,
            {"status": {**status, **gone}},
            "status",
        )
        return True

    def _track(self, job: dict[str, Any], pods: list[dict[str, Any]], status: dict) -> bool:
        """`trackJobStatusAndRemoveFinalizers`: each finished pod that still holds the
        finalizer is counted once in `status` and loses it."""
        wrote = False
        for pod in pods:
            if TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []):
                continue
            outcome = _outcome(pod, job)
            if _finished(job) or _interim(status.get("conditions") or []) is not None:
                outcome = outcome or "uncounted"
            if outcome is None:
                continue
            self._drop_finalizer(pod)
            wrote = True
            if outcome in ("succeeded", "failed"):
                _count(job, status, outcome, pod)
        return wrote

    def _manage(self, job: dict[str, Any], active: list[dict[str, Any]], status: dict) -> bool:
        """`manageJob`: as many pods active as wanted, within parallelism (`status`: the
        counts as this sync has them)."""
        spec, succeeded = job["spec"], int(status.get("succeeded") or 0)
        if spec.get("completionMode") == "Indexed":
            done = _parse_indexes(status.get("completedIndexes") or "")
            busy = {_index_of(pod) for pod in active}
            room = int(spec.get("parallelism", 1)) - len(active)
            missing = _missing(int(spec["completions"]), {*done, *busy}, room)
            return self._create([_indexed_pod(job, index) for index in missing])
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        if completions is None:
            # A work queue: once one pod succeeded, what runs may finish, no more start.
            want = len(active) if succeeded > 0 else parallelism
        else:
            want = max(0, min(int(completions) - succeeded, parallelism))
        if len(active) > want:
            return self._delete(sorted(active, key=_removal_order)[: len(active) - want])
        waiting = len([p for p in self._pods_of(job) if _terminating(p)])
        more = want - len(active) - (waiting if _only_replaces_failed(job) else 0)
        return self._create([_job_pod(job) for _ in range(more)])

    def _create(self, pods: list[dict[str, Any]]) -> bool:
        """A pod the API server refuses is not made (the controller's FailedCreate; it
        tries again on the Job's next sync)."""
        made = False
        for pod in pods:
            try:
                self.store.create(PODS, pod["metadata"]["namespace"], pod)
            except ApiError:
                break
            made = True
        return made

    def _delete(self, pods: list[dict[str, Any]]) -> bool:
        for pod in pods:
            meta = pod["metadata"]
            self.store.delete(PODS, meta["namespace"], meta["name"])
        return bool(pods)

    def _drop_finalizer(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        remaining = [f for f in meta.get("finalizers") or [] if f != TRACKING_FINALIZER]
        self.store.patch(
            PODS,
            meta.get("namespace", ""),
            meta["name"],
            MERGE_PATCH,
            {"metadata": {"finalizers": remaining or None}},
        )

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


def _count(job: dict[str, Any], status: dict[str, Any], outcome: str, pod: dict) -> None:
    spec = job.get("spec") or {}
    status[outcome] = int(status.get(outcome) or 0) + 1
    if spec.get("completionMode") == "Indexed" and outcome == "succeeded":
        done = _parse_indexes(status.get("completedIndexes") or "")
        index = _index_of(pod)
        if index is not None and index < int(spec["completions"]):
            done.add(index)
        status["completedIndexes"] = _format_indexes(done)
        status["succeeded"] = len(done)


def _complete(spec: dict[str, Any], status: dict[str, Any], active: list) -> bool:
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is None:
        return succeeded > 0 and not active
    return succeeded >= int(spec["completions"]) and not active


def _condition(kind: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def _interim(conditions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The FailureTarget or SuccessCriteriaMet condition the Job's end was judged by."""
    for condition in conditions:
        if condition.get("type") in _INTERIM and condition.get("status") == "True":
            return condition
    return None


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _terminating(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return "deletionTimestamp" in pod["metadata"] and phase not in ("Succeeded", "Failed")


def _removal_order(pod: dict[str, Any]) -> tuple[bool, bool, bool, str]:
    """`activePodsForRemoval`: unscheduled before scheduled, Pending before Running, not
    ready before ready, the newest first."""
    created = pod["metadata"].get("creationTimestamp", "")
    inverted = "".join(chr(0x10FFFF - ord(c)) for c in created)
    status = pod.get("status") or {}
    return (
        bool((pod.get("spec") or {}).get("nodeName")),
        status.get("phase") != "Pending",
        _ready(pod),
        inverted,
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


def _job_pod(job: dict[str, Any], generate_name: str = "") -> dict[str, Any]:
    """The pod `manageJob` makes from the template: the labels the API server puts on a
    Job's template (its generated selector), generateName `<job>-`, a controller
    reference that blocks the Job's foreground deletion."""
    meta, template = job["metadata"], copy.deepcopy(job["spec"]["template"])
    name = meta["name"]
    pod_meta = template.get("metadata") or {}
    pod_meta.pop("name", None)
    labels = dict(pod_meta.get("labels") or {})
    for key in ("batch.kubernetes.io/controller-uid", "controller-uid"):
        labels.setdefault(key, meta["uid"])
    for key in ("batch.kubernetes.io/job-name", "job-name"):
        labels.setdefault(key, name)
    pod_meta.update(
        namespace=meta["namespace"],
        labels=labels,
        generateName=generate_name or f"{name}-",
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
    return {"metadata": pod_meta, "spec": template.get("spec") or {}}


def _indexed_pod(job: dict[str, Any], index: int) -> dict[str, Any]:
    """The pod `manageJob` makes for one index of an Indexed Job."""
    name = job["metadata"]["name"]
    suffix = f"-{index}-"
    prefix = name + suffix
    if len(prefix) > _MAX_GENERATED_NAME:
        prefix = prefix[: _MAX_GENERATED_NAME - len(suffix)] + suffix
    pod = _job_pod(job, prefix)
    pod["metadata"]["labels"][COMPLETION_INDEX] = str(index)
    pod["metadata"].setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
    spec = pod["spec"]
    spec["hostname"] = f"{name}-{index}"
    for container in (*spec.get("initContainers", []), *spec.get("containers", [])):
        env = container.setdefault("env", [])
        if not any(var.get("name") == COMPLETION_INDEX_ENV for var in env):
            path = f"metadata.labels['{COMPLETION_INDEX}']"
            field = {"apiVersion": "v1", "fieldPath": path}
            env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": field}})
    return pod


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
