"""The kubelet API of the virtual node, as far as RunPod can back it: HTTPS on
`--kubelet-port` (10250), where the API server sends `kubectl logs`.

    GET /containerLogs/{namespace}/{pod}/{container}   the pod's log (see `runtime/pod_logs.py`)
    /exec, /attach, /portForward, /run                  a clear "not supported" answer
    GET /healthz                                        ok

Every request is authenticated and authorized first (see `auth`). Only the leader
serves logs: a standby answers 503 with a sentence, since the node's address points at
the leader once it has beaten. Answers are text, as the kubelet's are, so that the API
server can pass the words on to kubectl.
"""

from __future__ import annotations

import logging
import select
import ssl
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from reconciler.core.podlogs import LogOptionsError, parse_options, render
from reconciler.runtime.kubelet.auth import Authenticator, AuthError
from reconciler.runtime.pod_logs import LogError, PodLogs

log = logging.getLogger(__name__)

_STREAMING = ("exec", "attach", "portForward", "run")
STANDBY_MESSAGE = (
    "this runpod-reconciler replica is a standby: the leader serves pod "
    "logs (the node's InternalIP points at it once it leads)"
)


class KubeletServer:
    def __init__(
        self,
        address: tuple[str, int],
        context: ssl.SSLContext,
        auth: Authenticator,
        logs: PodLogs,
        is_leader: Callable[[], bool],
        clock: Callable[[], datetime],
    ) -> None:
        self.auth, self.logs, self.is_leader, self.clock = auth, logs, is_leader, clock
        self._server = _Server(address, _Handler)
        self._server.app = self
        self._server.socket = context.wrap_socket(
            self._server.socket, server_side=True, do_handshake_on_connect=False
        )
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> KubeletServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.2,), name="kubelet-endpoint", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    app: KubeletServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A failed handshake (no or a foreign certificate) is the caller's problem."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "runpod-reconciler-kubelet"

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("kubelet endpoint: " + format, *args)

    def _handle(self, method: str) -> None:
        app = self.server.app
        url = urlsplit(self.path)
        parts = [unquote(part) for part in url.path.split("/") if part]
        try:
            peer = (
                self.connection.getpeercert()
                if isinstance(self.connection, ssl.SSLSocket)
                else None
            )
            caller = app.auth.authenticate(peer, self.headers.get("Authorization"))
            app.auth.authorize(caller, method, url.path)
        except AuthError as exc:
            return self._text(exc.status, exc.message)
        if parts == ["healthz"]:
            return self._text(200, "ok")
        if parts and parts[0] in _STREAMING:
            return self._text(
                501,
                f"{parts[0]} is not supported for pods on RunPod: an "
                "instance runs one container without a kubelet; use the "
                "instance's SSH (runpod.io/public-ip) or its ports",
            )
        if method != "GET" or len(parts) != 4 or parts[0] != "containerLogs":
            return self._text(
                404,
                f"{url.path} is not served by runpod-reconciler's kubelet "
                "endpoint: only /containerLogs/{namespace}/{pod}/{container}",
            )
        if not app.is_leader():
            return self._text(503, STANDBY_MESSAGE)
        self._container_logs(parts[1], parts[2], parts[3], dict(parse_qsl(url.query)))

    def _container_logs(
        self, namespace: str, pod: str, container: str, query: dict[str, str]
    ) -> None:
        app = self.server.app
        try:
            options = parse_options(query, app.clock())
            lines = app.logs.lines(namespace, pod, container, options, self._client_gone)
        except LogOptionsError as exc:
            return self._text(400, str(exc))
        except LogError as exc:
            return self._text(exc.status, exc.message)
        except Exception:  # a reader gets a sentence, never a dropped connection
            log.exception("could not serve the log of %s/%s", namespace, pod)
            return self._text(500, "the log could not be read; the reconciler's log says why")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for data in render(lines, options):
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            log.debug("a log reader of %s/%s hung up", namespace, pod)
        self.close_connection = True

    def _client_gone(self) -> bool:
        """True once the reader has closed its end (asked while the log is quiet)."""
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return sock.recv(1) == b""
        except (OSError, ValueError):
            return True

    def _text(self, status: int, message: str) -> None:
        body = (message + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
