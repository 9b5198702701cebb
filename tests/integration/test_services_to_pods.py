"""Services reach pods on RunPod, through the real product over the simulators: a
Service selecting a pod on RunPod gets an EndpointSlice of the reconciler's (its own
`managed-by`, the Service's name label, the reconciler's address, ready with the pod),
every endpoint it lists answers with the pod's port (dialled at the listener's loopback
address: the advertised address is TEST-NET-1, never dialled), the EndpointSlice
controller publishes no endpoint for the pod (it has no pod IP), and the slice goes with
the pod; with no address to advertise, nothing is published."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.demo.sandbox import Sandbox

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")

ADVERTISED = "192.0.2.10"  # TEST-NET-1: stands for the reconciler's pod IP, never dialled
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        sandbox.enable_ssh(str(tmp_path / "key"))
        sandbox.configure(service_endpoint_address=ADVERTISED, service_listen_address="127.0.0.1")
        sandbox.start_tunnels()
        yield sandbox


def web_service(box: Sandbox, target: Any = 8080) -> None:
    box.kube_sim.put(
        "services",
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": target}],
            },
        },
    )


def running_web(box: Sandbox, name: str = "web-0") -> dict[str, Any]:
    box.add_pod(name, command=["python", "serve.py"], ports=[8080], labels={"app": "web"})
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod(name) or {})
    assert instance is not None
    box.runpod_sim.ssh.serve_http(instance["id"], 8080, f"from {name}")
    box.tick()  # the pod is Ready as this tick begins: its slice says so
    return box.pod(name) or {}


def slices(box: Sandbox, manager: str) -> list[dict[str, Any]]:
    return [
        s
        for s in box.kube_sim.list("endpointslices", "default")
        if s["metadata"]["labels"].get(SERVICE_NAME) == "web"
        and s["metadata"]["labels"].get(MANAGED_BY) == manager
    ]


def get(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.decode().split("\r\n\r\n", 1)[1]


def test_a_service_selecting_a_pod_on_runpod_reaches_it(box):
    web_service(box)
    pod = running_web(box)
    (ours,) = slices(box, "runpod-reconciler.runpod.io")
    (endpoint,) = ours["endpoints"]
    assert endpoint["addresses"] == [ADVERTISED]
    assert endpoint["conditions"]["ready"] is True
    assert endpoint["targetRef"]["uid"] == pod["metadata"]["uid"]
    (port,) = ours["ports"]
    assert port["name"] == "http"
    assert get(port["port"]) == "from web-0"
    # The controller's own slice leads nowhere for it: the pod has no IP.
    assert "podIP" not in pod["status"]
    assert all(s["endpoints"] == [] for s in slices(box, "endpointslice-controller.k8s.io"))


def test_a_named_target_port_is_the_containers(box):
    web_service(box, target="http")
    box.add_pod("web-0", command=["python", "serve.py"], ports=[8080], labels={"app": "web"})
    pod_spec = box.kube_sim.get("pods", "default", "web-0")
    assert pod_spec is not None
    # The sandbox's ports carry no names: a named target the pod lacks leads nowhere.
    box.tick()
    box.advance(30)
    box.tick()
    box.tick()
    assert slices(box, "runpod-reconciler.runpod.io") == []


def test_the_slice_goes_with_the_pod(box):
    web_service(box)
    running_web(box)
    assert len(slices(box, "runpod-reconciler.runpod.io")) == 1
    box.kube_sim.delete_pod("default", "web-0", grace_seconds=0)
    box.tick()
    assert slices(box, "runpod-reconciler.runpod.io") == []


def test_each_pod_its_own_endpoint(box):
    web_service(box)
    running_web(box, "web-0")
    running_web(box, "web-1")
    ours = slices(box, "runpod-reconciler.runpod.io")
    answers = sorted(get(s["ports"][0]["port"]) for s in ours)
    assert answers == ["from web-0", "from web-1"]


def test_nothing_is_published_without_an_address(box):
    box.configure(service_endpoint_address="")
    web_service(box)
    running_web(box)
    assert slices(box, "runpod-reconciler.runpod.io") == []
