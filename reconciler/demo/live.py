"""`reconciler demo --keep-running`: after the scenario, the simulated world goes on in
real time so that a person can use it with kubectl.

The simulated cluster has no kube-scheduler (its Job controller and garbage collector
make and delete Jobs' pods), so this module plays the parts the README's examples need,
through the simulator's own store as the tests do: a Pending pod whose placement rules
allow the virtual node is bound to it, and a running container uses some CPU and
answers on its ports. The reconciler ticks every few seconds and tells what it did, one
line per thing (`teller`), holding the database's writer lock as a deployed reconciler
would (so `reconciler sync --once --dry-run` works beside it, and a second writer is
refused).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from reconciler.core.node.placement import exclusion
from reconciler.core.pods import podinfo
from reconciler.demo.sandbox import Sandbox
from reconciler.demo.teller import Teller
from reconciler.runtime.process.wiring import LockKeeper

TICK_SECONDS = 2.0


class LiveWorld:
    def __init__(
        self,
        box: Sandbox,
        lock: LockKeeper | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.box, self._lock, self._monotonic = box, lock, monotonic
        self._teller: Teller | None = None
        self._last = monotonic()
        self._working: set[str] = set()
        """Instances whose container has started its (simulated) work."""

    def go_live(self, lock: LockKeeper, tell: Callable[[str], None]) -> None:
        """From now on time is the real time that passes, the writer lock is kept, and
        what the reconciler does is told, one line per thing."""
        self._lock, self._teller = lock, Teller(self.box, tell)
        self._last = self._monotonic()

    def step(self) -> None:
        """One beat: time moves on by the real time that passed, the cluster's
        controllers act, and the reconciler ticks."""
        now = self._monotonic()
        self.beat(max(0.0, now - self._last))
        self._last = now

    def beat(self, seconds: float) -> None:
        """Time moves on by `seconds`, the cluster's controllers act, and the reconciler
        ticks."""
        self.box.advance(seconds)
        self._schedule()
        self._run_workloads()
        if self._lock is not None:
            self._lock.renew_if_due()
        self.box.tick()
        if self._teller is not None:
            self._teller.look()

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
                    self.box.runpod_sim.ssh.serve_http(
                        instance["id"], port, f"{instance['name']} answers on port {port}\n"
                    )

    def _schedule(self) -> None:
        """The scheduler, for the virtual node only (the demo cluster has no other)."""
        node = self.box.kube_sim.get("nodes", None, self.box.settings.node.name)
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
