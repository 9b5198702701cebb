"""The simulated RunPod's wire: requests and replies, the route tables, the HTTP server.

Each resource serves its routes as methods of a small class, declared with the
module's own `RouteTable` (`@ROUTES("GET", "/v2/pods/{id}")`); a `Router` over the bound
tables finds the handler for a request, or answers 404 (no such path) or 405 with
`Allow` (the path is served, not with that method), as RunPod's gateway does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.logs import LogStream
from reconciler.sim.runpod.validate import Problem


@dataclass(frozen=True)
class SimRequest:
    """One API request as the simulator saw it (the body as sent, secrets masked)."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    """The request's headers (Authorization masked), names as the client spelled them."""
    at: str = ""
    """When the simulator answered it (its clock, ISO 8601)."""
    created: str | None = None
    """The id of the pod or cluster this request created, whatever the answer said (a
    create that fails after it was made answers 5xx, and it exists all the same)."""
    listed_from: str | None = None
    """For a create: when the new pod first shows in the list (the listing lag)."""


@dataclass
class Wire:
    """How the HTTP server sends one answer's body when a fault shapes it
    (`faults`): trickled on the simulator's clock, or padded."""

    seconds_per_byte: float = 0.0
    size: int = 0
    chunked: bool = False
    sent: int = 0
    """Bytes of the body really sent before it ended or the client hung up."""

    def pieces(self, payload: bytes) -> Iterator[bytes]:
        """The body as sent: padded to `size` (a JSON object gets a `padding` field
        before its closing brace), made 64 KiB at a time."""
        if self.size <= len(payload) or not payload.endswith(b"}"):
            yield payload
            return
        head = payload[:-1] + (b',"padding":"' if len(payload) > 2 else b'"padding":"')
        left = self.size - len(head) - 2
        yield head
        while left > 0:
            piece = min(left, 64 * 1024)
            yield b"x" * piece
            left -= piece
        yield b'"}'

    def length(self, payload: bytes) -> int:
        return max(self.size, len(payload)) if payload.endswith(b"}") else len(payload)


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    # Real seconds to stall before answering (create-then-hang).
    hang: float = 0.0
    # A log stream: the body is its backfill, then the handler keeps it going.
    stream: LogStream | None = None
    # How the body goes out when a fault shapes it (trickled, padded): `faults.Wire`.
    wire: Wire | None = None

    @classmethod
    def problem(cls, problem: Problem) -> Reply:
        return cls(problem.status, problem.body(), problem.headers, "application/problem+json")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    now: datetime
    match: dict[str, str]
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The `{id}` of the route's path: a pod's, a cluster's, a volume's, a registry's."""
        return unquote(self.match["id"])


Handler = Callable[[Any, Request], Reply]
H = TypeVar("H", bound=Handler)


class RouteTable:
    """The routes one class serves, in the order they are declared."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, re.Pattern[str], Handler]] = []

    def __call__(self, method: str, pattern: str) -> Callable[[H], H]:
        def register(func: H) -> H:
            regex = re.compile("^" + pattern.replace("{id}", "(?P<id>[^/]+)") + "$")
            self.entries.append((method, regex, func))
            return func

        return register


class Router:
    """The routes of several classes, each table bound to the object that serves it."""

    def __init__(self, served: Sequence[tuple[RouteTable, object]]) -> None:
        self._routes = [
            (method, regex, func, owner)
            for table, owner in served
            for method, regex, func in table.entries
        ]
        # Routes live in one module per resource: one declared twice would be shadowed
        # by whichever table came first, silently.
        seen = [(method, regex.pattern) for method, regex, _, _ in self._routes]
        twice = sorted({route for route in seen if seen.count(route) > 1})
        if twice:
            raise ValueError(f"routes served twice: {twice}")

    def dispatch(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        body: Any,
        now: datetime,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        allowed = []
        for route_method, regex, func, owner in self._routes:
            match = regex.match(path)
            if match is None:
                continue
            if route_method == method:
                found = match.groupdict()
                request = Request(method, path, params, body, now, found, headers or {})
                return func(owner, request)
            allowed.append(route_method)
        if allowed:
            raise Problem(405, "method not allowed here", headers={"Allow": ", ".join(allowed)})
        raise Problem(404, f"no route for {path}")


def bool_param(params: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter, false when absent; anything but true/false is 422."""
    value = params.get(name, "false")
    if value not in ("true", "false"):
        raise Problem(422, "Request validation failed.", errors=[f"{name}: expected boolean"])
    return value == "true"


def int_param(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(params.get(name, default))
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise Problem(422, "Request validation failed.", errors=[f"{name}: {low}..{high}"])
    return value


class BadJson:
    """Marks a body that did not parse, so the answer can be a problem, not a crash."""


def parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return BadJson()


def split_target(target: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(target)
    return parts.path, dict(parse_qsl(parts.query, keep_blank_values=True))


class StreamServer(Protocol):
    def serve_stream(self, stream: LogStream, send: Callable[[bytes], None]) -> bool: ...

    def close_stream(self, stream: LogStream) -> None: ...


class Backend(Protocol):
    """What the HTTP handler needs of the simulator's front door (`gateway`)."""

    clock: SimClock
    logs: StreamServer

    def handle_api(
        self,
        method: str,
        target: str,
        authorization: str | None,
        raw_body: bytes,
        headers: Mapping[str, str] | None = None,
    ) -> Reply: ...

    def handle_admin(self, method: str, target: str, raw_body: bytes) -> Reply: ...

    def stall(self, seconds: float) -> bool: ...


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # Keep-alive connections park a thread each; closing must not wait for them.
    block_on_close = False
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], backend: Backend) -> None:
        super().__init__(address, _HttpHandler)
        self.backend = backend


class _HttpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the second one waits for
    # the client's delayed ACK (~40 ms per request).
    disable_nagle_algorithm = True
    server: Server
    # An idle keep-alive connection gives up its thread after this long.
    timeout = 30

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        backend = self.server.backend
        if self.path.startswith("/_sim/"):
            reply = backend.handle_admin(method, self.path, raw)
        else:
            reply = backend.handle_api(
                method,
                self.path,
                self.headers.get("Authorization"),
                raw,
                dict(self.headers.items()),
            )
        if reply.hang and backend.stall(reply.hang):
            return
        if reply.stream is not None:
            self._stream(reply, reply.stream)
        else:
            self._write(reply)

    def _stream(self, reply: Reply, stream: LogStream) -> None:
        """Chunked SSE: a clean end sends the last chunk, a cut closes without it."""
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            wire = reply.wire
            send = self._chunk
            if wire is not None and wire.seconds_per_byte:
                send = lambda data: self._trickle(data, wire)  # noqa: E731
            ended = self.server.backend.logs.serve_stream(stream, send)
            if ended:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up
        finally:
            self.server.backend.logs.close_stream(stream)
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _write(self, reply: Reply) -> None:
        payload = _encode(reply)
        if reply.wire is not None:
            self._write_shaped(reply, payload, reply.wire)
            return
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.status != 204:
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. after its timeout)

    def _write_shaped(self, reply: Reply, payload: bytes, wire: Wire) -> None:
        """The body as a fault sends it: trickled on the simulator's clock, or padded and
        sent piece by piece (chunked if asked), never held whole."""
        backend = self.server.backend
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", reply.content_type)
            if wire.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(wire.length(payload)))
            self.end_headers()
            for piece in wire.pieces(payload):
                if wire.seconds_per_byte:
                    for at in range(len(piece)):
                        backend.clock.advance(wire.seconds_per_byte)
                        self._send_piece(piece[at : at + 1], wire.chunked)
                        wire.sent += 1
                        # A breath of real time, so the client reads each byte as it comes.
                        if backend.stall(0.001):
                            return
                else:
                    self._send_piece(piece, wire.chunked)
                    wire.sent += len(piece)
            if wire.chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up
        self.close_connection = True

    def _trickle(self, data: bytes, wire: Wire) -> None:
        """A stream's data a byte (one chunk) at a time, each after `seconds_per_byte`."""
        for at in range(len(data)):
            self.server.backend.clock.advance(wire.seconds_per_byte)
            self._chunk(data[at : at + 1])
            wire.sent += 1
            if self.server.backend.stall(0.001):
                raise BrokenPipeError("the simulator is stopping")

    def _send_piece(self, piece: bytes, chunked: bool) -> None:
        if chunked:
            self._chunk(piece)
        else:
            self.wfile.write(piece)
            self.wfile.flush()

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The `Date` header from the simulated clock, as a real server dates its answers
        by its own clock (RFC 9110 §6.6.1): a log stream's Date is when its backfill was
        cut off, so events stamped a second or more after it are live."""
        moment = self.server.backend.clock.now().timestamp() if timestamp is None else timestamp
        return formatdate(moment, usegmt=True)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is kept by the simulator itself."""


def _encode(reply: Reply) -> bytes:
    if reply.status == 204 or reply.body is None:
        return b""
    if isinstance(reply.body, bytes):
        return reply.body
    return json.dumps(reply.body, separators=(",", ":")).encode()
