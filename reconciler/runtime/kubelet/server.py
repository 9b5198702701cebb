"""The kubelet API of the virtual node, as far as RunPod can back it: HTTPS on
`--kubelet-port` (10250), where the API server sends `kubectl logs`.

    GET /containerLogs/{namespace}/{pod}/{container}   the pod's log (see `runtime/logs/sources.py`)
    GET|POST /exec/{namespace}/{pod}/{container}        SPDY exec over SSH (see `exec`)
    GET|POST /portForward/{namespace}/{pod}             SPDY port-forward over SSH
    /attach, /run                                       a clear "not supported" answer
    GET /metrics/resource, /stats/summary               CPU pods' use, for `kubectl top`
                                                        (see `resource_metrics`)
    GET /healthz                                        ok

Every request is authenticated and authorized first (see `auth`), then found in one
route table (`ROUTES`), and every refusal is an `EndpointError` or an error that carries
its own status, turned into an answer in one place (`answers.answer_for`): virtual-kubelet's
`node/api/server.go` and `helpers.go` are the model. A new route is one `Route`. Before
that, nothing costs more than a bounded wait and a bounded size: a request's head must
arrive whole within `header_timeout` and hold at most `max_headers` headers of
`max_header_bytes` together (`request_head`); at most `max_unauthenticated` connections
wait for authentication, and beyond `max_connections` a new one is closed at once
(`connections`). Every request comes as the API server, so the streams a tenant can
hold are counted by the pod's namespace (`slots`): log follows, and exec and
port-forward sessions. Only the leader serves pods: a standby answers 503 with a
sentence, since the node's address points at the leader once it has beaten. Answers are
text, as the kubelet's are, so that the API server can pass the words on to kubectl.
"""

from __future__ import annotations

import io
import json
import logging
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

from reconciler.adapters.readable import readable
from reconciler.adapters.spdy.session import Session, SessionLimits
from reconciler.adapters.ssh.client import SshConnector
from reconciler.core.logs.kubectl_logs import LogOptions, parse_options, render
from reconciler.core.pods.usage import ContainerUsage
from reconciler.runtime.kubelet.answers import (
    NO_SSH_KEY,
    NOT_SUPPORTED,
    REFUSALS,
    STANDBY_MESSAGE,
    EndpointError,
    answer_for,
)
from reconciler.runtime.kubelet.auth import Authenticator
from reconciler.runtime.kubelet.connections import Admission, EndpointHTTPServer
from reconciler.runtime.kubelet.exec import (
    ATTACH_UNSUPPORTED,
    EXEC_STREAMS,
    SshTargets,
    serve_exec,
)
from reconciler.runtime.kubelet.portforward import MAX_FORWARDS, serve_port_forward
from reconciler.runtime.kubelet.request_head import (
    DeadlineReader,
    HeadBudget,
    HeadCut,
    HeadTooLarge,
)
from reconciler.runtime.kubelet.resource_metrics import resource_metrics, sample_time, stats_summary
from reconciler.runtime.kubelet.route import Route
from reconciler.runtime.kubelet.slots import NamespaceSlots, Refused
from reconciler.runtime.logs.sources import PodLogs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EndpointLimits:
    idle_timeout: float = 30.0
    """Seconds of silence allowed while a handshake or a request's headers are due."""
    header_timeout: float = 10.0
    """Seconds a request's head may take whole (the first's TLS handshake included)."""
    max_connections: int = 200
    max_unauthenticated: int = 32
    max_headers: int = 64
    max_header_bytes: int = 64 * 1024
    max_follows: int = 100
    max_follows_per_namespace: int = 32
    max_streaming_per_namespace: int = 16
    streaming_idle_timeout: float = 4 * 3600.0
    """Seconds an upgraded connection (exec, port-forward) may pass without a frame."""


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
        usage: Callable[[datetime], list[ContainerUsage]] | None = None,
    ) -> None:
        """`usage` gives the CPU pods' use at a time (the engine's meter); None: none."""
        self.auth, self.logs, self.is_leader, self.clock = auth, logs, is_leader, clock
        self.limits = limits
        self.usage = usage or (lambda _now: [])
        self.node_name = logs.node_name
        self.follows = NamespaceSlots(limits.max_follows_per_namespace, limits.max_follows)
        self.streams = NamespaceSlots(limits.max_streaming_per_namespace)
        self.exec: ExecBackend | None = None
        self.admission = Admission(limits.max_connections, limits.max_unauthenticated)
        self._server = EndpointHTTPServer(address, _KubeletHandler, self.admission)
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

    @property
    def connections(self) -> int:
        """Connections held now (each holds a thread)."""
        return self.admission.held

    @property
    def streaming(self) -> int:
        """Exec and port-forward sessions served now."""
        return self.streams.held


@dataclass(frozen=True)
class ExecBackend:
    """What exec needs: where a pod's sshd is, and the way in."""

    targets: SshTargets
    ssh: SshConnector


class _Upgrade:
    """The HTTP side of a streaming request (see `exec.Upgrader`)."""

    def __init__(self, handler: _KubeletHandler, max_streams: int) -> None:
        self._handler, self._max_streams = handler, max_streams

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
        # The idle timeout is for the handshake and the headers; from here the longer
        # streaming one holds (an exec shell may stay silent while its user thinks). It
        # bounds a write the client does not take in, too.
        idle = handler.server.app.limits.streaming_idle_timeout
        handler.connection.settimeout(idle)
        limits = SessionLimits(max_streams=self._max_streams, idle_timeout=idle)
        return Session(handler.connection, handler.rfile.read1, limits).start()


class _KubeletHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: EndpointHTTPServer
    server_version = "runpod-reconciler-kubelet"
    _responding = False
    _served = False
    """Whether a request of this connection was read (the next one is kept alive)."""

    def setup(self) -> None:
        # Every read and write of this connection, the lazy TLS handshake included, gives
        # up after this much silence (a reader that stops reading a followed log, too).
        super().setup()
        limits = self.server.app.limits
        self.connection.settimeout(limits.idle_timeout)
        self._reader = DeadlineReader(self.connection)
        self._reader.start(limits.header_timeout)  # the handshake's and the first head's
        self.rfile = self._buffered = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        if self._served:
            # Kept alive: the next request may wait the idle timeout to begin, then has
            # the header timeout from its first byte.
            try:
                if not self._buffered.peek(1):
                    self.close_connection = True
                    return
            except (TimeoutError, OSError):
                self.close_connection = True
                return
            self._reader.start(self.server.app.limits.header_timeout)
        self._served = True
        super().handle_one_request()

    def parse_request(self) -> bool:
        """The request line and headers, within the head's budget: beyond it, 431 and the
        connection closes; a head cut short closes it with no answer."""
        limits = self.server.app.limits
        self.rfile = HeadBudget(self._buffered, limits.max_headers, limits.max_header_bytes)  # type: ignore[assignment]
        try:
            parsed = super().parse_request()
        except HeadCut:
            self.close_connection = True
            return False
        except HeadTooLarge as exc:
            self.close_connection = True
            self._text(
                431,
                f"{exc}: at most {limits.max_headers} headers of "
                f"{limits.max_header_bytes} bytes together (--kubelet-max-headers, "
                "--kubelet-max-header-bytes)",
            )
            return False
        finally:
            self.rfile = self._buffered
        self._reader.stop()
        return parsed

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
        self._responding = False  # a kept-alive connection serves several requests
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
            # Any pod's token authenticates; only a caller the node trusts leaves the
            # connections that may be closed for a newer one.
            ticket = self.server.ticket(self.request)
            if ticket is not None:
                app.admission.authenticated(ticket)
            route, named = _route(method, parts, url.path)
            if route.leader_only and not app.is_leader():
                raise EndpointError(503, STANDBY_MESSAGE)
            route.serve(self, named, url.query)
        except Exception as exc:  # every refusal answered the one way
            status, message = answer_for(exc)
            if not isinstance(exc, REFUSALS):
                log.exception("kubelet endpoint: could not serve %s %s", method, url.path)
            if self._responding:  # too late for a status: end the answer short
                self.close_connection = True
            else:
                self._text(status, message)

    def send_response(self, code: int, message: str | None = None) -> None:
        self._responding = True
        super().send_response(code, message)

    def _healthz(self, _named: Mapping[str, str], _query: str) -> None:
        self._text(200, "ok")

    def _resource_metrics(self, _named: Mapping[str, str], _query: str) -> None:
        now = sample_time(self.server.app.clock())
        text = resource_metrics(self.server.app.usage(now), now)
        self._body(text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _stats_summary(self, _named: Mapping[str, str], _query: str) -> None:
        app = self.server.app
        now = app.clock()
        summary = stats_summary(app.node_name, app.usage(now), now)
        self._body(json.dumps(summary).encode(), "application/json")

    def _body(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _not_supported(self, _named: Mapping[str, str], _query: str) -> None:
        what = urlsplit(self.path).path.strip("/").split("/", 1)[0]
        raise EndpointError(501, NOT_SUPPORTED.format(what))

    def _attach(self, _named: Mapping[str, str], _query: str) -> None:
        raise EndpointError(400, ATTACH_UNSUPPORTED)

    def _exec(self, named: Mapping[str, str], query: str) -> None:
        backend = self._streaming("exec")
        namespace, pod, container = named["namespace"], named["pod"], named["container"]
        with self._streaming_slot(namespace, "exec"):
            serve_exec(
                _Upgrade(self, EXEC_STREAMS),
                self.headers,
                parse_qs(query, keep_blank_values=True),
                lambda: backend.targets.resolve(namespace, pod, container),
                backend.ssh,
            )
        self.close_connection = True

    def _port_forward(self, named: Mapping[str, str], _query: str) -> None:
        backend = self._streaming("port-forward")
        namespace, pod = named["namespace"], named["pod"]
        with self._streaming_slot(namespace, "port-forward"):
            serve_port_forward(
                _Upgrade(self, 2 * MAX_FORWARDS),
                self.headers,
                pod,
                lambda: backend.targets.resolve(namespace, pod, ""),
                backend.ssh,
            )
        self.close_connection = True

    def _streaming(self, what: str) -> ExecBackend:
        """The way to the pods' sshd: none without a key (501), none on a standby (503)."""
        app = self.server.app
        if app.exec is None:
            raise EndpointError(501, NO_SSH_KEY.format(what))
        if not app.is_leader():
            raise EndpointError(503, STANDBY_MESSAGE)
        return app.exec

    @contextmanager
    def _streaming_slot(self, namespace: str, what: str) -> Iterator[None]:
        app = self.server.app
        with app.streams.hold(namespace) as refused:
            if refused is not None:
                limit = app.limits.max_streaming_per_namespace
                raise EndpointError(
                    429,
                    f"{what} refused: the pods of namespace {namespace} have {limit} exec and "
                    "port-forward sessions open on this node already, the most one namespace "
                    "may (--kubelet-max-streaming-per-namespace); end one first",
                )
            yield

    def _container_logs(self, named: Mapping[str, str], query: str) -> None:
        app = self.server.app
        options = parse_options(dict(parse_qsl(query)), app.clock())
        if not options.follow:
            return self._send_log(named, options)
        namespace = named["namespace"]
        with app.follows.hold(namespace) as refused:
            # 400: of a kubelet's refusals, the API server passes on the sentence of a
            # 400 or a 500 only; a 429's or a 503's it replaces with a generic one.
            if refused is Refused.NAMESPACE:
                raise EndpointError(
                    400,
                    f"the pods of namespace {namespace} have "
                    f"{app.limits.max_follows_per_namespace} logs followed on this node "
                    "already, the most one namespace may "
                    "(--kubelet-max-follows-per-namespace); stop one first",
                )
            if refused is Refused.NODE:
                raise EndpointError(
                    400,
                    f"this node serves {app.limits.max_follows} log follows already, the "
                    "most it may (--kubelet-max-follows); stop one first",
                )
            self._send_log(named, options)
        return None

    def _send_log(self, named: Mapping[str, str], options: LogOptions) -> None:
        app = self.server.app
        namespace, pod, container = named["namespace"], named["pod"], named["container"]
        lines = app.logs.lines(namespace, pod, container, options, self._client_gone)
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
            if not readable(sock, 0):
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


_ANY = frozenset({"GET", "POST", "PUT", "DELETE"})
_GET = frozenset({"GET"})

_STREAMS = frozenset({"GET", "POST"})

ROUTES: tuple[Route, ...] = (
    Route(_GET, ("healthz",), _KubeletHandler._healthz, leader_only=False),
    Route(_GET, ("metrics", "resource"), _KubeletHandler._resource_metrics),
    Route(_GET, ("stats", "summary"), _KubeletHandler._stats_summary),
    Route(
        _GET,
        ("containerLogs", "{namespace}", "{pod}", "{container}"),
        _KubeletHandler._container_logs,
    ),
    # Exec and port-forward say why they cannot serve before a standby says it is one.
    Route(_STREAMS, ("exec", "{namespace}", "{pod}", "{container}"), _KubeletHandler._exec, False),
    Route(
        _STREAMS, ("attach", "{namespace}", "{pod}", "{container}"), _KubeletHandler._attach, False
    ),
    Route(_STREAMS, ("portForward", "{namespace}", "{pod}"), _KubeletHandler._port_forward, False),
    *(
        Route(_ANY, (streaming, "*"), _KubeletHandler._not_supported, leader_only=False)
        for streaming in ("exec", "attach", "portForward", "run")
    ),
)


def _route(method: str, parts: list[str], path: str) -> tuple[Route, dict[str, str]]:
    for route in ROUTES:
        named = route.match(method, parts)
        if named is not None:
            return route, named
    raise EndpointError(
        404,
        f"{path} is not served by runpod-reconciler's kubelet endpoint: only "
        "/containerLogs/{namespace}/{pod}/{container}",
    )
