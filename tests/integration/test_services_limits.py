"""The Services' tunnels under their limits and across restarts: more Service ports than
--service-forwards-per-pod leave the newest out with an Event naming them; a connection
past --service-connections-per-pod is closed at once while the others carry on; a new
reconciler process makes the tunnels again (the open connections of the old one are
gone) and publishes its new listening ports."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.demo.sandbox import Sandbox

from .test_services_to_cluster import _http_server, in_pod, running, selectorless
from .test_services_to_pods import ADVERTISED, get, running_web, slices, web_service

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        sandbox.enable_ssh(str(tmp_path / "key"))
        sandbox.configure(service_endpoint_address=ADVERTISED, service_listen_address="127.0.0.1")
        sandbox.start_tunnels()
        yield sandbox


def test_more_service_ports_than_the_cap_leave_the_newest_out(box):
    box.configure(service_forwards_per_pod=2)  # `kubernetes` (the oldest) and one more
    first, second = _http_server(b"first"), _http_server(b"second")
    selectorless(box, "first", 80, first.server_address[1])
    box.advance(1)
    selectorless(box, "second", 81, second.server_address[1])
    pod = running(box, "client")
    assert in_pod(box, pod, "curl -s http://first/") == "first"
    assert in_pod(box, pod, "getent hosts second || echo unknown").strip() == "unknown"
    told = [e["message"] for e in box.events("client") if e["reason"] == "ServicesUnreachable"]
    assert any("default/second not reachable" in m for m in told), told
    first.shutdown()
    second.shutdown()


def _echo_server() -> int:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return int(server.getsockname()[1])


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


HOLD_TWO = (
    "python3 -c \"import socket;a=socket.create_connection(('127.0.0.1',7));"
    "a.sendall(b'a');print(a.recv(1));b=socket.create_connection(('127.0.0.1',7));"
    "b.settimeout(10);b.sendall(b'b');print(b.recv(1));a.sendall(b'c');print(a.recv(1))\""
)


def test_a_connection_past_the_cap_is_closed_and_the_others_carry_on(box):
    box.configure(service_connections_per_pod=1)
    selectorless(box, "echo", 7, _echo_server())
    pod = running(box, "client")
    out = in_pod(box, pod, HOLD_TWO + " 2>&1")
    # The first connection answers before and after; the second is closed unanswered.
    assert out.splitlines() == ["b'a'", "b''", "b'c'"], out


def test_a_new_process_makes_the_tunnels_and_listeners_again(box):
    backend = _http_server(b"after the restart")
    selectorless(box, "backend", 80, backend.server_address[1])
    web_service(box)
    running_web(box)
    pod = box.pod("web-0") or {}
    before = slices(box, "runpod-reconciler.runpod.io")[0]["ports"][0]["port"]
    box.restart()  # a new reconciler process: the old one's connections are gone
    # Both Services have port 80: the variables' port tells them apart.
    reach = "curl -s http://backend:$BACKEND_SERVICE_PORT/"
    # The instance's sshd lets the old connection's forwards go as it notices the
    # connection ended; a forward refused before that is asked for again by the next sync.
    for _ in range(3):
        box.tick()
        if in_pod(box, pod, reach) == "after the restart":
            break
    assert in_pod(box, pod, reach) == "after the restart"
    after = slices(box, "runpod-reconciler.runpod.io")[0]["ports"][0]["port"]
    assert get(after) == "from web-0"
    assert after != before
    backend.shutdown()
