"""Services and pods on RunPod on a real control plane: the reconciler's EndpointSlice
for a Service selecting a pod on RunPod is accepted by the real API server (its address
a documentation address standing for the reconciler's pod IP: the API server refuses a
loopback endpoint), its endpoint answers with the pod's port (dialled at the listener's
loopback address), and the real EndpointSlice controller publishes no endpoint for the
pod, which shows no pod IP."""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realk8s.plane import Plane
from tests.realk8s.test_pods import gpu_pod
from tests.realk8s.world import World, wait_for

ADVERTISED = "192.0.2.10"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


@pytest.fixture
def services_world(plane: Plane, reconciler_kubeconfig: Path) -> Iterator[World]:
    with tempfile.TemporaryDirectory(prefix="realk8s-services-") as directory:
        started = World(
            plane,
            reconciler_kubeconfig,
            Path(directory),
            args=(
                f"--service-endpoint-address={ADVERTISED}",
                "--service-listen-address=127.0.0.1",
            ),
        )
        try:
            wait_for("the virtual node to be Ready", started.node_ready, timeout=60)
            yield started
        finally:
            started.stop()


def slices(world: World, manager: str) -> list[dict[str, Any]]:
    found = world.kubectl(
        "get",
        "endpointslices",
        "-l",
        f"kubernetes.io/service-name=web,{MANAGED_BY}={manager}",
        "-o",
        "yaml",
    ).stdout
    return list(yaml.safe_load(found)["items"] or [])


def get(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.decode().split("\r\n\r\n", 1)[1]


def test_our_endpoint_slice_is_accepted_and_the_controller_publishes_none(services_world):
    world = services_world
    world.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8888}],
            },
        }
    )
    pod = gpu_pod("web-0")
    pod["metadata"]["labels"] = {"app": "web"}  # type: ignore[index]
    world.apply(pod)

    def instance() -> dict[str, Any] | None:
        found = world.get("pod", "web-0")
        return world.instance_for(found) if found else None

    running = world.wait_for("the pod's instance", instance)
    world.wait_for(
        "it to run",
        lambda: world.runpod.instances[running["id"]]["status"] == "RUNNING" or None,
    )
    world.runpod.ssh.serve_http(running["id"], 8888, "from web-0")

    def ready_slice() -> dict[str, Any] | None:
        ours = slices(world, "runpod-reconciler.runpod.io")
        ready = [s for s in ours if s["endpoints"][0]["conditions"].get("ready")]
        return ready[0] if ready else None

    ours = world.wait_for("our EndpointSlice with a ready endpoint", ready_slice, timeout=120)
    assert ours["endpoints"][0]["addresses"] == [ADVERTISED]
    assert get(ours["ports"][0]["port"]) == "from web-0"
    controller = world.wait_for(
        "the controller's slice", lambda: slices(world, "endpointslice-controller.k8s.io") or None
    )
    # The real controller publishes a pod at its IP: ours has none, so nothing leads nowhere.
    assert all(not s.get("endpoints") for s in controller), controller
    shown = world.get("pod", "web-0") or {}
    assert not shown["status"].get("podIP")
