"""The simulated pods' sshd honours remote forwarding (`tcpip-forward`) as OpenSSH's
sshd does, checked with OpenSSH's client: with `GatewayPorts no` (the default) an
explicit 127.0.0.1 is kept and any other address asked for becomes loopback; with
`clientspecified` the address asked for is kept; a port already taken is refused. The
listener, the pod's loopback and its `/etc/hosts` are the pod's own: the machine's
loopback and hosts file are untouched, a command of the pod resolves from its own file,
and that file, bind-mounted as Docker does, is written in place but not renamed over."""

from __future__ import annotations

import http.server
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_sim_ssh import key, running, ssh  # noqa: F401 - the shared fixture

pytestmark = pytest.mark.skipif(
    shutil.which("ssh") is None or shutil.which("unshare") is None, reason="no OpenSSH or unshare"
)


@pytest.fixture
def sink() -> Iterator[int]:
    """An HTTP server on the machine's loopback answering "from the cluster"."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"from the cluster"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _forwarded(pod, key, spec: str, command: str):  # noqa: F811
    return ssh(pod, key, "-o", "ExitOnForwardFailure=yes", "-R", spec, command)


def test_a_remote_forward_on_loopback_reaches_the_client_side(sim, key, sink):  # noqa: F811
    pod = running(sim, key)
    port = _free_port()
    done = _forwarded(
        pod, key, f"127.0.0.1:{port}:127.0.0.1:{sink}", f"curl -s http://127.0.0.1:{port}/"
    )
    assert done.stdout == "from the cluster", done.stderr
    # The listener is in the pod's network, not on the machine's loopback.
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 2):
        pass


def test_another_loopback_address_becomes_localhost_without_gateway_ports(sim, key, sink):  # noqa: F811
    pod = running(sim, key)
    port = _free_port()
    probe = (
        f"curl -s -m 5 http://127.0.1.5:{port}/ || echo refused; curl -s http://127.0.0.1:{port}/"
    )
    done = _forwarded(pod, key, f"127.0.1.5:{port}:127.0.0.1:{sink}", probe)
    assert done.stdout == "refused\nfrom the cluster", done.stderr


def test_clientspecified_keeps_the_address_asked_for(sim, key, sink):  # noqa: F811
    pod = running(sim, key)
    sim.ssh.set_gateway_ports(pod["id"], "clientspecified")
    port = _free_port()
    probe = f"curl -s http://127.0.1.5:{port}/; curl -s -m 5 http://127.0.0.1:{port}/ || echo :no"
    done = _forwarded(pod, key, f"127.0.1.5:{port}:127.0.0.1:{sink}", probe)
    assert done.stdout == "from the cluster:no\n", done.stderr


def test_a_port_in_use_in_the_pod_is_refused(sim, key, sink):  # noqa: F811
    pod = running(sim, key)
    port = _free_port()
    first, second = (f"127.0.0.1:{port}:127.0.0.1:{to}" for to in (sink, sink + 1))
    done = ssh(pod, key, "-o", "ExitOnForwardFailure=yes", "-R", first, "-R", second, "echo ran")
    assert done.returncode != 0 and "ran" not in done.stdout
    assert "remote port forwarding failed" in done.stderr


def test_each_pod_resolves_names_from_its_own_hosts_file(sim, key):  # noqa: F811
    pod, other = running(sim, key), running(sim, key)
    machine = Path("/etc/hosts").read_bytes()
    add = "printf '127.0.0.1\\tbackend.default.svc.cluster.local\\n' >> /etc/hosts"
    assert ssh(pod, key, add).returncode == 0
    assert ssh(pod, key, "getent hosts backend.default.svc.cluster.local").stdout.startswith(
        "127.0.0.1"
    )
    assert "backend.default" in sim.ssh.hosts_file(pod["id"]).read_text()
    assert ssh(other, key, "getent hosts backend.default.svc.cluster.local").returncode == 2
    assert Path("/etc/hosts").read_bytes() == machine
    # Bind-mounted as Docker mounts it: replaced by a rename, it refuses.
    moved = ssh(pod, key, "cp /etc/hosts /tmp/h && mv /tmp/h /etc/hosts")
    assert moved.returncode != 0 and "busy" in moved.stderr.lower()
