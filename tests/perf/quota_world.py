"""The world the quota benchmark runs in: simulators on a clock that follows real time,
and `reconciler sync` processes (the loop mode, watch on) pointed at them.

The simulators run in this process; each reconciler is its own process, driven only by
real HTTP. Because the reconcilers pace themselves on real time (the scheduler, the
watch's debouncer, the RunPod client's waits), the simulators' `SimClock` is moved
forward in step with real time by a background thread: the RunPod quota windows then
reset when the reconcilers expect them to.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from reconciler.core.domain import OWNER_ENV, POD_UID_ENV
from reconciler.sim.clock import SimClock, real_start
from reconciler.sim.kube.simulator import KubeSimulator
from reconciler.sim.runpod.simulator import RunPodSimulator

API_KEY = "quota-bench-runpod-key"
NAMESPACE = "bench"
NODE_NAME = "virtual-runpod"


class RealTimeDriver:
    """Moves a SimClock forward as real time passes, every `step` seconds."""

    def __init__(self, clock: SimClock, step: float = 0.01) -> None:
        self.clock, self.step = clock, step
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="real-time-clock", daemon=True)

    def __enter__(self) -> RealTimeDriver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.step):
            now = time.monotonic()
            self.clock.advance(now - last)
            last = now


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pod_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {}},
        "spec": {
            "nodeName": NODE_NAME,
            "restartPolicy": "Always",
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
        },
    }


@dataclass
class Cluster:
    """One Kubernetes cluster (a simulator) with its `reconciler sync` process."""

    name: str
    kube: KubeSimulator
    workdir: Path
    process: subprocess.Popen[str] | None = None
    added: dict[str, float] = field(default_factory=dict)
    """Pod uid -> simulated time (epoch seconds) the pod was created."""

    @property
    def owner_id(self) -> str:
        return f"{self.name}/{NODE_NAME}"

    def start_reconciler(self, runpod_url: str, *extra: str) -> None:
        kubeconfig = self.kube.write_kubeconfig(str(self.workdir / f"{self.name}.kubeconfig"))
        log = (self.workdir / f"{self.name}.log").open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler",
                "--database-url",
                f"sqlite:///{self.workdir / (self.name + '.db')}",
                "sync",
                "--health-address",
                f"127.0.0.1:{free_port()}",
                "--kubeconfig",
                kubeconfig,
                "--runpod-url",
                runpod_url,
                "--cluster-id",
                self.name,
                "--max-instances",
                "5000",
                "--max-hourly-spend",
                "100000",
                "--node-pods",
                "5000",
                "--node-gpus",
                "5000",
                # Several reconcilers on one machine: each its own kubelet port.
                "--kubelet-port",
                str(free_port()),
                *extra,
            ],
            env={**os.environ, "RUNPOD_API_KEY": API_KEY, "RECONCILER_LOG_LEVEL": "INFO"},
            text=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def add_pods(self, prefix: str, count: int, clock: SimClock) -> None:
        for index in range(count):
            pod = self.kube.create_pod(pod_manifest(f"{prefix}-{index:05d}"))
            self.added[pod["metadata"]["uid"]] = clock.monotonic()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, lines: int = 30) -> str:
        path = self.workdir / f"{self.name}.log"
        return "\n".join(path.read_text().splitlines()[-lines:]) if path.exists() else ""


@dataclass
class QuotaWorld:
    clock: SimClock
    runpod: RunPodSimulator
    clusters: list[Cluster]

    def created_at(self) -> dict[tuple[str, str], float]:
        """(owner id, pod uid) -> simulated time its first instance was created."""
        found: dict[tuple[str, str], float] = {}
        for instance in self.runpod.instances.values():
            env = instance.get("env") or {}
            key = (env.get(OWNER_ENV, ""), env.get(POD_UID_ENV, ""))
            at = datetime.fromisoformat(instance["createdAt"].replace("Z", "+00:00")).timestamp()
            found[key] = min(at, found.get(key, at))
        return found

    def missing(self) -> int:
        """Pods added to any cluster that have no instance yet."""
        created = self.created_at()
        return sum(1 for c in self.clusters for uid in c.added if (c.owner_id, uid) not in created)


@contextmanager
def quota_world(
    workdir: Path,
    clusters: int = 1,
    quota: tuple[int, int, int] = (60, 3000, 50000),
    gpu_types: list[dict[str, Any]] | None = None,
    start: datetime | None = None,
) -> Iterator[QuotaWorld]:
    # From the wall clock's time by default: the reconcilers' own clock (their billing
    # reads, grace periods) must agree with the simulators' timestamps.
    clock = real_start() if start is None else SimClock(start)
    runpod = RunPodSimulator(API_KEY, clock=clock, quota=quota, gpu_types=gpu_types).start()
    kubes = []
    try:
        for number in range(clusters):
            kube = KubeSimulator(f"quota-bench-token-{number}", clock=clock).start()
            kube.put(
                "namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            kubes.append(kube)
        world = QuotaWorld(
            clock,
            runpod,
            [Cluster(f"cluster-{chr(97 + n)}", kube, workdir) for n, kube in enumerate(kubes)],
        )
        with RealTimeDriver(clock):
            try:
                yield world
            finally:
                for cluster in world.clusters:
                    cluster.stop()
    finally:
        for kube in kubes:
            kube.stop()
        runpod.stop()
