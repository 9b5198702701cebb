"""A pod on RunPod reaches the cluster's Services, through the real product over the
simulators (the instance's sshd is the RunPod simulator's, its network and /etc/hosts
its own): the kubelet's link variables at create, the names `svc`, `svc.ns`,
`svc.ns.svc`, `svc.ns.svc.cluster.local` through the hosts block, the traffic over a
remote forward to a ready backend named by the Service's EndpointSlice (an FQDN slice
naming a loopback HTTP server: the only loopback backend the API server admits), a
Service made after the pod started, the tunnel made again after its SSH connection
broke, the connection cap, and a pod without SSH told so by an Event."""

from __future__ import annotations

import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.ssh.client import HostKeys, SshConnector
from reconciler.core.service_settings import ServiceBackends
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.kubelet.sshkey import load_identity

pytestmark = pytest.mark.skipif(
    shutil.which("unshare") is None or shutil.which("curl") is None, reason="no unshare or curl"
)


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.body  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _http_server(body: bytes) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    server.body = body  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        sandbox.enable_ssh(str(tmp_path / "key"))
        sandbox.start_tunnels()
        yield sandbox


def selectorless(
    box: Sandbox, name: str, port: int, backend_port: int, ns: str = "default"
) -> None:
    """A Service without a selector and its FQDN EndpointSlice naming localhost."""
    box.ensure_namespace(ns)
    box.kube_sim.put(
        "services",
        {
            "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"port": port, "name": "http"}]},
        },
    )
    box.kube_sim.put(
        "endpointslices",
        {
            "metadata": {
                "name": f"{name}-1",
                "namespace": ns,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "FQDN",
            "endpoints": [{"addresses": ["localhost"], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": backend_port, "protocol": "TCP"}],
        },
    )


def running(box: Sandbox, name: str, ns: str = "default", **fields: Any) -> dict[str, Any]:
    box.add_pod(name, namespace=ns, command=["python", "serve.py"], **fields)
    box.tick()
    box.advance(30)
    box.tick()
    pod = box.pod(name, ns)
    assert pod is not None and pod["status"]["phase"] == "Running", pod
    return pod


def in_pod(box: Sandbox, pod: dict[str, Any], command: str) -> str:
    """Run `command` in the pod's instance over SSH, as `kubectl exec` would."""
    address = box.engine.ssh_addresses.of(pod["metadata"]["uid"])
    assert address is not None
    identity = load_identity(box.settings.ssh.key_file)
    connector = SshConnector(identity.private_pem, HostKeys(), box.settings.ssh.proxy_command)
    transport = connector.connect(address.instance_id, address.host, address.port)
    try:
        channel = transport.open_session(timeout=10)
        channel.settimeout(30)
        channel.exec_command(command)
        out = b""
        while chunk := channel.recv(65536):
            out += chunk
        return out.decode()
    finally:
        transport.close()


def test_a_pod_reaches_a_service_by_its_variables_and_its_names(box):
    backend = _http_server(b"backend says hi")
    selectorless(box, "backend", 80, backend.server_address[1])
    pod = running(box, "client")
    env = box.instance_for(pod)["env"]
    assert env["BACKEND_SERVICE_HOST"] == "127.0.0.1"
    assert env["BACKEND_PORT_80_TCP_ADDR"] == "127.0.0.1"
    assert "KUBERNETES_SERVICE_HOST" in env
    via_env = in_pod(box, pod, "curl -s http://$BACKEND_SERVICE_HOST:$BACKEND_SERVICE_PORT/")
    assert via_env == "backend says hi"
    for name in (
        "backend",
        "backend.default",
        "backend.default.svc",
        "backend.default.svc.cluster.local",
    ):
        assert in_pod(box, pod, f"curl -s http://{name}/") == "backend says hi", name
    backend.shutdown()


def test_a_service_made_after_the_pod_started_is_reached_by_name(box):
    pod = running(box, "client")
    later = _http_server(b"made later")
    selectorless(box, "later", 8081, later.server_address[1])
    assert "later" not in in_pod(box, pod, "cat /etc/hosts")
    box.tick()
    assert in_pod(box, pod, "curl -s http://later.default.svc.cluster.local:8081/") == "made later"
    later.shutdown()


def test_the_tunnel_comes_back_after_its_connection_broke(box):
    backend = _http_server(b"still here")
    selectorless(box, "backend", 80, backend.server_address[1])
    pod = running(box, "client")
    assert in_pod(box, pod, "curl -s http://backend/") == "still here"
    instance = box.instance_for(pod)["id"]
    box.runpod_sim.ssh.break_connections(instance)
    assert in_pod(box, pod, "curl -s -m 5 http://backend/ || echo down") == "down\n"
    box.tick()
    assert in_pod(box, pod, "curl -s http://backend/") == "still here"
    backend.shutdown()


def test_a_service_without_a_ready_backend_refuses(box):
    unready = _http_server(b"not ready yet")
    selectorless(box, "backend", 80, unready.server_address[1])
    piece = box.kube_sim.get("endpointslices", "default", "backend-1")
    piece["endpoints"][0]["conditions"]["ready"] = False
    box.kube_sim.put("endpointslices", piece)
    pod = running(box, "client")
    assert in_pod(box, pod, "curl -s -m 5 http://backend/ || echo refused") == "refused\n"
    unready.shutdown()


def test_only_the_pods_own_namespace_without_consent(box):
    theirs = _http_server(b"not yours")
    selectorless(box, "db", 80, theirs.server_address[1], ns="other")
    pod = running(box, "client", annotations={"runpod.io/services": "other/db"})
    assert in_pod(box, pod, "getent hosts db.other || echo unknown").strip() == "unknown"
    theirs.shutdown()


def test_loopback_backends_are_refused_by_default(box):
    box.configure(service_backends=ServiceBackends.CLUSTER)
    backend = _http_server(b"the reconciler's own loopback")
    selectorless(box, "sneaky", 80, backend.server_address[1])
    pod = running(box, "client")
    assert in_pod(box, pod, "curl -s -m 5 http://sneaky/ || echo refused") == "refused\n"
    backend.shutdown()


def test_a_pod_without_ssh_gets_an_event(box):
    pod = running(box, "client")
    box.runpod_sim.ssh.set_running(box.instance_for(pod)["id"], False)
    box.tunnels.close()
    box.tick()
    events = [e for e in box.events("client") if e["reason"] == "ServicesUnreachable"]
    assert events and "unreachable" in events[0]["message"], box.events("client")


def test_a_steady_tick_with_tunnels_asks_runpod_nothing_more(box):
    backend = _http_server(b"steady")
    selectorless(box, "backend", 80, backend.server_address[1])
    pod = running(box, "client")
    box.tick()  # the tunnels are up; what follows is steady
    seen = len(box.runpod_sim.requests)
    box.tick()
    assert in_pod(box, pod, "curl -s http://backend/") == "steady"
    asked = [(r.method, r.path) for r in box.runpod_sim.requests[seen:]]
    assert asked == [("GET", "/v2/pods")], asked
    backend.shutdown()


def test_without_tunnels_no_variables(tmp_path):
    """`sync --once` (a CronJob) has no process to carry tunnels: its pods get no link
    variables, which would point where nothing listens."""
    with Sandbox() as once:
        once.enable_ssh(str(tmp_path / "key"))
        selectorless(once, "backend", 80, 1)
        pod = running(once, "client")
        env = once.instance_for(pod)["env"]
        assert not [name for name in env if "SERVICE_HOST" in name], env
