"""The SPDY session and the exec status against the real client: kubectl 1.32 with
`KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` speaks SPDY/3.1 straight to whatever answers
its exec request, so a bare HTTP server that upgrades to our `Session` stands in for the
API server and kubelet at once. kubectl must print both streams and exit with the code
the error stream carries; stdin must reach us and its end must be seen."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from reconciler.adapters.spdy.session import Session, Stream
from reconciler.core.node import remotecommand as rc

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "image": "x"}]},
    "status": {"phase": "Running"},
}
DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "pods",
                "singularName": "pod",
                "namespaced": True,
                "kind": "Pod",
                "verbs": ["get"],
            },
        ],
    },
    "/api/v1/namespaces/default/pods/p": POD,
}
WAIT = 20


def run_command(streams: dict[str, Stream], command: list[str]) -> int:
    """A stand-in for the container: `cat` echoes stdin, `sh -c` prints and exits 3."""
    if command == ["cat"]:
        streams["stdout"].write(streams["stdin"].read_all() + b"[stdin ended]\n")
        return 0
    streams["stdout"].write(b"out\n")
    streams["stderr"].write(b"err\n")
    return 3


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        body = json.dumps(DISCOVERY.get(path, {})).encode()
        self.send_response(200 if path in DISCOVERY else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        protocol = rc.negotiate(
            self.headers.get_all("X-Stream-Protocol-Version") or [], rc.EXEC_PROTOCOLS
        )
        assert protocol == rc.V4
        self.send_response(101)
        self.send_header("Connection", "Upgrade")
        self.send_header("Upgrade", "SPDY/3.1")
        self.send_header("X-Stream-Protocol-Version", protocol)
        self.end_headers()
        self.wfile.flush()
        session = Session(self.connection).start()
        wanted = {"error", "stdout", "stderr"} | ({"stdin"} if "stdin" in query else set())
        streams: dict[str, Stream] = {}
        while set(streams) != wanted:
            stream = session.accept(WAIT)
            assert stream is not None
            streams[stream.header("streamType")] = stream
        code = run_command(streams, query["command"])
        for name in ("stdout", "stderr"):
            streams[name].close()
        streams["error"].write(rc.exit_status(protocol, query["command"], code))
        streams["error"].close()
        session.wait(WAIT)  # kubectl resets the streams and says GOAWAY when done
        session.close()
        self.close_connection = True


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"},
                    }
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "default"}}
                ],
            }
        )
    )
    yield path
    server.shutdown()
    server.server_close()


def kubectl(kubeconfig: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_kubectl_prints_both_streams_and_exits_with_the_status_code(kubeconfig):
    done = kubectl(kubeconfig, "exec", "p", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "out\n"
    assert done.stderr == "err\ncommand terminated with exit code 3\n"


def test_kubectl_stdin_arrives_and_its_end_is_seen(kubeconfig):
    done = kubectl(kubeconfig, "exec", "-i", "p", "--", "cat", stdin="data\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "data\n[stdin ended]\n"
