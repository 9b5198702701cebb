"""`reconciler demo --keep-running`: after the scenario, the simulated world goes on in
real time so that a person can use it with kubectl.

The simulated cluster has no kube-scheduler, and its Job controller makes only Indexed
Jobs' pods, so this module plays the parts the README's examples need, through the
simulator's own store as the tests do: a NonIndexed Job gets its pods (and loses them
when it is deleted), a Pending pod whose placement rules allow the virtual node is bound
to it, and a running container uses some CPU and answers on its ports. The reconciler
ticks every few seconds, holding the database's writer lock as a deployed reconciler
would (so `reconciler sync --once --dry-run` works beside it, and a second writer is refused).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable
from typing import Any

from reconciler.core.node.placement import exclusion
from reconciler.core.pods import facts as podinfo
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.wiring import LockKeeper

TICK_SECONDS = 2.0


class LiveWorld:
    def __init__(
        self,
        box: Sandbox,
        lock: LockKeeper | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.box, self._lock, self._monotonic = box, lock, monotonic
        self._last = monotonic()
        # The scenario played the Job controller for its own Jobs already.
        self._jobs_started = {j["metadata"]["uid"] for j in box.kube_sim.list("jobs", None)}
        self._working: set[str] = set()
        """Instances whose container has started its (simulated) work."""

    def step(self) -> None:
        """One beat: time moves on by the real time that passed, the cluster's
        controllers act, and the reconciler ticks."""
        now = self._monotonic()
        self.box.advance(max(0.0, now - self._last))
        self._last = now
        self._start_jobs()
        self._collect_garbage()
        self._schedule()
        self._run_workloads()
        if self._lock is not None:
            self._lock.renew_if_due()
        self.box.tick()

    def _start_jobs(self) -> None:
        """The Job controller's first move: a new Job gets its pods (parallelism of them,
        at most completions); what happens after is the reconciler's part."""
        for job in self.box.kube_sim.list("jobs", None):
            uid = job["metadata"]["uid"]
            if uid in self._jobs_started:
                continue
            self._jobs_started.add(uid)
            spec = job.get("spec") or {}
            if spec.get("completionMode") == "Indexed":
                continue  # the simulator's Job controller makes an Indexed Job's pods
            count = min(int(spec.get("parallelism", 1)), int(spec.get("completions", 1)))
            for _ in range(count):
                self.box.kube_sim.create_pod(_job_pod(job))

    def _collect_garbage(self) -> None:
        """The garbage collector: pods of a deleted Job are deleted too (`kubectl delete
        job` propagates in the background by default)."""
        jobs = {j["metadata"]["uid"] for j in self.box.kube_sim.list("jobs", None)}
        for pod in self.box.kube_sim.list("pods", None):
            meta = pod["metadata"]
            owners = [
                r["uid"]
                for r in meta.get("ownerReferences") or ()
                if r.get("kind") == "Job" and r.get("controller")
            ]
            if owners and owners[0] not in jobs and not meta.get("deletionTimestamp"):
                self.box.kube_sim.delete_pod(meta["namespace"], meta["name"])

    def _run_workloads(self) -> None:
        """What the demo's containers do once running: they use some CPU and memory
        (RunPod reports it in `runtime`, so `kubectl top` has figures), and answer HTTP
        on the ports they declare (so `kubectl port-forward` reaches something)."""
        for instance in self.box.owned_instances():
            if instance["status"] != "RUNNING" or instance["id"] in self._working:
                continue
            self._working.add(instance["id"])
            self.box.runpod_sim.set_instance_fields(
                instance["id"], {"runtime": {"cpu": {"util": 40}, "memory": {"util": 30}}}
            )
            for spec in instance.get("ports") or ():
                port = int(str(spec).split("/")[0])
                if port == 22:
                    continue
                with contextlib.suppress(ValueError):  # no sshd: nothing reaches it anyway
                    self.box.runpod_sim.serve_http(
                        instance["id"], port, f"{instance['name']} answers on port {port}\n"
                    )

    def _schedule(self) -> None:
        """The scheduler, for the virtual node only (the demo cluster has no other)."""
        node = self.box.kube_sim.get("nodes", None, self.box.settings.node_name)
        if node is None:
            return
        for pod in self.box.kube_sim.list("pods", None):
            meta, spec = pod["metadata"], pod.get("spec") or {}
            if (
                spec.get("nodeName")
                or meta.get("deletionTimestamp")
                or podinfo.phase(pod) != "Pending"
                or exclusion(pod, node) is not None
            ):
                continue
            self.box.kube_sim.store.bind(
                meta["namespace"],
                meta["name"],
                {
                    "target": {"kind": "Node", "name": node["metadata"]["name"]},
                    "metadata": {"uid": meta["uid"]},
                },
            )


def _job_pod(job: dict[str, Any]) -> dict[str, Any]:
    meta, template = job["metadata"], job["spec"]["template"]
    name, uid = meta["name"], meta["uid"]
    labels = {
        **((template.get("metadata") or {}).get("labels") or {}),
        "job-name": name,
        "controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "batch.kubernetes.io/controller-uid": uid,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{secrets.token_hex(3)[:5]}",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"],
    }
