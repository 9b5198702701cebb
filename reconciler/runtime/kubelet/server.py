"""The kubelet API of the virtual node, as far as RunPod can back it: HTTPS on
`--kubelet-port` (10250), where the API server sends `kubectl logs`.

    GET /containerLogs/{namespace}/{pod}/{container}   the pod's log (see `source`)
    GET|POST /exec/{namespace}/{pod}/{container}        SPDY exec over SSH (see `exec`)
    GET|POST /portForward/{namespace}/{pod}             SPDY port-forward over SSH
    /attach, /run                                       a clear "not supported" answer
    GET /healthz                                        ok

Every request is authenticated and authorized first (see `auth`). Before that, nothing
costs more than a bounded wait: a connection silent for `idle_timeout` during its TLS
handshake or its request's headers is closed, and beyond `max_connections` a new one
is closed at once, as a kubelet's server does; one caller follows at most
`max_follows_per_client` logs at once. Only the leader serves logs: a standby answers
503 with a sentence, since the node's address points at the leader once it has beaten.
Answers are text, as the kubelet's are, so that the API server can pass the words on
to kubectl.
"""

from __future__ import annotations

import logging
import select
import ssl
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

from reconciler.adapters.spdy.session import Session
from reconciler.adapters.ssh.client import SshConnector
from reconciler.core.podlogs import LogOptions, LogOptionsError, parse_options, render
from reconciler.runtime.kubelet.auth import Authenticator, AuthError, Caller
from reconciler.runtime.kubelet.exec import ATTACH_UNSUPPORTED, SshTargets, serve_exec
from reconciler.runtime.kubelet.portforward import serve_port_forward
from reconciler.runtime.kubelet.source import LogError, PodLogs

log = logging.getLogger(__name__)

_STREAMING = ("exec", "attach", "portForward", "run")
NO_SSH_KEY = (
    "{} is not available: this runpod-reconciler runs without an SSH key "
    "(--ssh-key-file), so its instances have no SSH access"
)
STANDBY_MESSAGE = (
    "this runpod-reconciler replica is a standby: the leader serves pod "
    "logs (the node's InternalIP points at it once it leads)"
)


@dataclass(frozen=True)
class EndpointLimits:
    idle_timeout: float = 30.0
    """Seconds of silence allowed while a handshake or a request's headers are due."""
    max_connections: int = 200
    max_follows_per_client: int = 50


class KubeletServer:
    def __init__(
        self,
        address: tuple[str, int],
        context: ssl.SSLContext,
        auth: Authenticator,
        logs: PodLogs,
        is_leader: Callable[[], bool],
        clock: Callable[[], datetime],
        limits: EndpointLimits = EndpointLimits(),
    ) -> None:
        self.auth, self.logs, self.is_leader, self.clock = auth, logs, is_leader, clock
        self.limits = limits
        self._follows: Counter[str] = Counter()
        self._follows_lock = threading.Lock()
        self.exec: ExecBackend | None = None
        self._server = _Server(address, _Handler)
        self._server.app = self
        self._server.slots = threading.BoundedSemaphore(limits.max_connections)
        self._server.held_lock = threading.Lock()
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

    @property
    def connections(self) -> int:
        """Connections held now (each holds a thread)."""
        return self._server.held

    @contextmanager
    def follow_slot(self, caller: Caller) -> Iterator[bool]:
        """Whether `caller` may follow one more log; the slot is held for the block."""
        with self._follows_lock:
            allowed = self._follows[caller.user] < self.limits.max_follows_per_client
            if allowed:
                self._follows[caller.user] += 1
        try:
            yield allowed
        finally:
            if allowed:
                with self._follows_lock:
                    self._follows[caller.user] -= 1


@dataclass(frozen=True)
class ExecBackend:
    """What exec needs: where a pod's sshd is, and the way in."""

    targets: SshTargets
    ssh: SshConnector


class _Upgrade:
    """The HTTP side of a streaming request (see `exec.Upgrader`)."""

    def __init__(self, handler: _Handler) -> None:
        self._handler = handler

    def refuse(self, status: int, message: str, headers: Mapping[str, str] = {}) -> None:
        self._handler._text(status, message, headers)

    def upgrade(self, protocol: str) -> Session:
        handler = self._handler
        handler.send_response(101)
        handler.send_header("Connection", "Upgrade")
        handler.send_header("Upgrade", "SPDY/3.1")
        handler.send_header("X-Stream-Protocol-Version", protocol)
        handler.end_headers()
        handler.wfile.flush()
        # The idle timeout is for the handshake and the headers: an exec shell may stay
        # silent for as long as its user thinks.
        handler.connection.settimeout(None)
        return Session(handler.connection, recv=handler.rfile.read1).start()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    app: KubeletServer
    slots: threading.BoundedSemaphore
    held_lock: threading.Lock
    held = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread per connection, up to the cap; beyond it the connection is closed
        before its handshake, so that idle sockets cannot pile up threads."""
        if not self.slots.acquire(blocking=False):
            log.warning("kubelet endpoint: %s connections held; closing a new one", self.held)
            self.shutdown_request(request)
            return
        with self.held_lock:
            self.held += 1
        try:
            super().process_request(request, client_address)
        except Exception:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self.held_lock:
            self.held -= 1
        self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A failed handshake (no or a foreign certificate) is the caller's problem."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "runpod-reconciler-kubelet"

    def setup(self) -> None:
        # Every read and write of this connection, the lazy TLS handshake included, gives
        # up after this much silence (a reader that stops reading a followed log, too).
        super().setup()
        self.connection.settimeout(self.server.app.limits.idle_timeout)

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
        if method in ("GET", "POST") and len(parts) == 4 and parts[0] in ("exec", "attach"):
            return self._exec(parts, parse_qs(url.query, keep_blank_values=True))
        if method in ("GET", "POST") and len(parts) == 3 and parts[0] == "portForward":
            return self._port_forward(parts[1], parts[2])
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
        query = dict(parse_qsl(url.query))
        try:
            options = parse_options(query, app.clock())
        except LogOptionsError as exc:
            return self._text(400, str(exc))
        if not options.follow:
            return self._container_logs(parts[1], parts[2], parts[3], options)
        with app.follow_slot(caller) as allowed:
            if not allowed:
                return self._text(
                    503,
                    f"{caller.user} follows {app.limits.max_follows_per_client} logs on this "
                    "node already, the most one caller may (--kubelet-max-follows-per-client); "
                    "stop one first",
                )
            self._container_logs(parts[1], parts[2], parts[3], options)

    def _exec(self, parts: list[str], query: dict[str, list[str]]) -> None:
        app = self.server.app
        if parts[0] == "attach":
            return self._text(400, ATTACH_UNSUPPORTED)
        if app.exec is None:
            return self._text(501, NO_SSH_KEY.format("exec"))
        if not app.is_leader():
            return self._text(503, STANDBY_MESSAGE)
        backend, (namespace, pod, container) = app.exec, parts[1:]
        serve_exec(
            _Upgrade(self),
            self.headers,
            query,
            lambda: backend.targets.resolve(namespace, pod, container),
            backend.ssh,
        )
        self.close_connection = True
        return None

    def _port_forward(self, namespace: str, pod: str) -> None:
        app = self.server.app
        if app.exec is None:
            return self._text(501, NO_SSH_KEY.format("port-forward"))
        if not app.is_leader():
            return self._text(503, STANDBY_MESSAGE)
        backend = app.exec
        serve_port_forward(
            _Upgrade(self),
            self.headers,
            pod,
            lambda: backend.targets.resolve(namespace, pod, ""),
            backend.ssh,
        )
        self.close_connection = True
        return None

    def _container_logs(
        self, namespace: str, pod: str, container: str, options: LogOptions
    ) -> None:
        app = self.server.app
        try:
            lines = app.logs.lines(namespace, pod, container, options, self._client_gone)
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

    def _text(self, status: int, message: str, headers: Mapping[str, str] = {}) -> None:
        body = (message + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
