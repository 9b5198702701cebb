"""The product against the real control plane: `reconciler sync` as its own process, with
the shipped RBAC's ServiceAccount token, talking to a real kube-apiserver and to the
RunPod simulator over loopback.

The simulator's clock follows the wall clock here (a real API server stamps its own
times, and its node lifecycle controller judges the Lease by them), so these tests wait
for what they expect with a bounded poll instead of advancing time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml

from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.net import PROXY_COMMAND
from reconciler.sim.runpod.simulator import RunPodSimulator
from tests.realk8s.plane import Plane, free_port, kubeconfig

API_KEY = "realk8s-runpod-key"
NODE = "virtual-runpod"
NAMESPACE = "runpod-system"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "common"
T = TypeVar("T")


class WallClock:
    """Moves a SimClock along with real time, so the simulator's timestamps and the real
    API server's agree."""

    def __init__(self) -> None:
        self.clock = SimClock(start=datetime.now(UTC))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while not self._stop.wait(0.1):
            behind = (datetime.now(UTC) - self.clock.now()).total_seconds()
            if behind > 0:
                self.clock.advance(behind)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float = 90.0,
    explain: Callable[[], str] = lambda: "",
) -> T:
    """`probe()`'s first true answer, polled for up to `timeout` seconds; on a time-out
    the error carries what `explain` says of the worlds."""
    deadline = time.monotonic() + timeout
    while True:
        answer = probe()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{explain()}")
        time.sleep(0.5)


def install_rbac(plane: Plane) -> Path:
    """The shipped namespace, ServiceAccount, RBAC and StorageClass, and a kubeconfig with
    that ServiceAccount's token: the reconciler runs with exactly what deploy/ grants."""
    for name in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "storageclass.yaml"):
        plane.kubectl("apply", "-f", str(DEPLOY / name))
    token = plane.kubectl(
        "create", "token", "runpod-reconciler", "-n", NAMESPACE, "--duration=4h"
    ).stdout.strip()
    path = plane.workdir / "reconciler.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(plane.url, plane.ca, token, "runpod-reconciler")))
    return path


class World:
    """One reconciler process and one RunPod simulator on a running plane."""

    def __init__(
        self, plane: Plane, reconciler_kubeconfig: Path, workdir: Path, args: tuple[str, ...] = ()
    ) -> None:
        """`args`: more flags for `reconciler sync`."""
        self.plane, self.workdir, self.args = plane, workdir, args
        self.wall = WallClock()
        self.runpod = RunPodSimulator(
            API_KEY, clock=self.wall.clock, provisioning_seconds=1, starting_seconds=1
        ).start()
        self.kubelet_port = free_port()
        self.kubeconfig = reconciler_kubeconfig
        self.log_path = workdir / "reconciler.log"
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        log = self.log_path.open("ab")
        process = subprocess.Popen(
            [
                # The installed program, as the image runs it.
                str(Path(sys.executable).with_name("reconciler")),
                f"--database-url=sqlite:///{self.workdir / 'reconciler.db'}",
                "sync",
                f"--kubeconfig={self.kubeconfig}",
                f"--runpod-url={self.runpod.base_url}",
                "--interval=1",
                "--heartbeat-interval=2",
                f"--health-address=127.0.0.1:{free_port()}",
                "--kubelet-address=127.0.0.1",
                f"--kubelet-port={self.kubelet_port}",
                f"--ssh-key-file={self.workdir / 'ssh-key'}",
                # The simulator's public IPs are reached through its network's relay.
                f"--ssh-proxy-command={PROXY_COMMAND}",
                "--create-grace-time=20",
                "--orphan-grace-time=30",
                *self.args,
            ],
            env={**os.environ, "RUNPOD_API_KEY": API_KEY, "RECONCILER_NODE_NAME": NODE},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        return process

    def kill(self) -> None:
        """The reconciler dies at once (SIGKILL): no clean stop, no last heartbeat."""
        self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        """A new reconciler process on the same database and kubelet port."""
        self.process = self._start()

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float = 90.0) -> T:
        return wait_for(what, probe, timeout, self.explain)

    def explain(self) -> str:
        """The cluster's pods, claims and Events, and the reconciler's last log lines."""
        state = self.plane.kubectl(
            "get", "pods,pvc,pv,events", "-A", "-o", "wide", check=False
        ).stdout
        return f"{state}\n--- reconciler log ---\n{self.log()[-6000:]}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(
                f"the reconciler exited ({self.process.returncode}):\n{self.log()[-4000:]}"
            )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.runpod.stop()
        self.wall.stop()

    # --- reading the worlds ----------------------------------------------------------

    def kubectl(
        self, *args: str, check: bool = True, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        self.check_alive()
        return self.plane.kubectl(*args, check=check, **kw)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        found = self.kubectl("get", kind, name, "-n", namespace, "-o", "yaml", check=False)
        return yaml.safe_load(found.stdout) if found.returncode == 0 else None

    def apply(self, manifest: dict[str, Any] | str) -> None:
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        self.kubectl("apply", "-f", "-", input=text)

    def instance_for(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        uid = pod["metadata"]["uid"]
        for instance in self.runpod.instances.values():
            if (instance.get("env") or {}).get("RUNPOD_RECONCILER_POD_UID") == uid:
                return instance
        return None

    def plane_get_node(self) -> dict[str, Any]:
        """The virtual node as the API server has it (read as admin, whatever the
        reconciler's state)."""
        found = self.plane.kubectl("get", "node", NODE, "-o", "yaml")
        return dict(yaml.safe_load(found.stdout))

    def node_ready(self) -> bool:
        node = self.get("node", NODE, namespace="")
        conditions = (node or {}).get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
