"""`kubectl logs -f` through a real kube-apiserver, which calls the kubelet endpoint as
itself for every user: the follows one namespace may hold are counted by the pod's
namespace, so when one namespace has used its share, another's follow is still served
(keyed by caller, they shared one count, and one namespace took it all)."""

from __future__ import annotations

import queue
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realk8s.plane import Plane
from tests.realk8s.test_pods import gpu_pod
from tests.realk8s.world import World, wait_for

PER_NAMESPACE = 2


@pytest.fixture
def world(
    plane: Plane, reconciler_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    monkeypatch.setenv("RECONCILER_KUBELET_MAX_FOLLOWS_PER_NAMESPACE", str(PER_NAMESPACE))
    with tempfile.TemporaryDirectory(prefix="realk8s-world-") as directory:
        started = World(plane, reconciler_kubeconfig, Path(directory))
        try:
            wait_for("the virtual node to be Ready", started.node_ready, timeout=60)
            yield started
        finally:
            started.stop()


class Follower:
    """One `kubectl logs -f`, its lines read as they come."""

    def __init__(self, world: World, pod: str, namespace: str) -> None:
        config = world.plane.write_admin_kubeconfig(world.workdir / "admin.kubeconfig")
        self.process = subprocess.Popen(
            ["kubectl", f"--kubeconfig={config}", "logs", "-f", pod, "-n", namespace],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def saw(self, text: str) -> bool:
        while not self.lines.empty():
            if text in self.lines.get():
                return True
        return False

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def running(world: World, name: str, namespace: str) -> str:
    pod = gpu_pod(name)
    pod["metadata"] = {**pod["metadata"], "namespace": namespace}  # type: ignore[dict-item]
    world.apply(pod)
    found = world.wait_for(
        f"{namespace}/{name} to run",
        lambda: (
            (p := world.get("pod", name, namespace)) and p["status"].get("phase") == "Running" and p
        ),
    )
    instance = world.instance_for(found)
    assert instance is not None
    return str(instance["id"])


def test_one_namespaces_follows_leave_another_namespace_its_own(world: World) -> None:
    world.kubectl("create", "namespace", "team-b")
    ours, theirs = running(world, "a", "default"), running(world, "b", "team-b")
    followers = [Follower(world, "a", "default") for _ in range(PER_NAMESPACE)]
    try:
        for n, follower in enumerate(followers):
            world.runpod.logs.write_container(ours, [f"line {n}"])
            world.wait_for("a follower to stream", lambda f=follower, n=n: f.saw(f"line {n}"))
        refused = world.kubectl(
            "logs", "-f", "a", "-n", "default", "--request-timeout=30s", check=False
        )
        assert refused.returncode != 0
        # The API server passes on a 400's sentence (a 429's or 503's it replaces).
        assert "--kubelet-max-follows-per-namespace" in refused.stderr, refused.stderr
        other = Follower(world, "b", "team-b")
        followers.append(other)
        world.runpod.logs.write_container(theirs, ["team-b's line"])
        world.wait_for("team-b's follower to stream", lambda: other.saw("team-b's line"))
    finally:
        for follower in followers:
            follower.stop()
