"""kubectl's WebSocket exec and port-forward, served as kube-apiserver 1.32 serves them.

kubectl 1.30+ first asks for a WebSocket (a GET with `Upgrade: websocket`). The API
server never passes it to a kubelet as such; it ends the WebSocket itself and speaks
SPDY/3.1 to the kubelet (KEP 4006):

- exec whose client offers `v5.channel.k8s.io` is *translated* (kube-apiserver's
  StreamTranslatorHandler): the WebSocket is accepted at once with that subprotocol and an
  empty message on the lowest channel kubectl reads (stdout, else stderr, else the
  status channel) says so; then a SPDY client (`spdy`) opens the kubelet's streams
  (error, stdin, stdout, stderr unless a tty, resize with a tty), as client-go's SPDY
  executor does. Every WebSocket message is one channel byte and its data: 0 stdin, 1
  stdout, 2 stderr, 3 status, 4 resize (JSON sizes); v5's close signal, 255 then a
  channel, ends that channel (kubectl's end of stdin). The kubelet's status is read as
  client-go reads it and written again on channel 3 as the translator writes it (a
  non-zero exit: `NonZeroExitCode` with the `ExitCode` cause; anything else an
  `InternalError`), then a close frame, and the API server waits for kubectl to close.
- port-forward whose client offers `SPDY/3.1+<protocol>.k8s.io` is *tunnelled*
  (TunnelingHandler, 1.31+): the kubelet is asked for a SPDY upgrade with the protocols
  stripped of the prefix; once it answers 101, the WebSocket is accepted with the prefix
  and the kubelet's choice, and the SPDY bytes ride in binary messages both ways.
- any other WebSocket (say `v4.channel.k8s.io` from an older client) is proxied to the
  kubelet as it came, where a kubelet speaking only SPDY refuses it.

The WebSocket framing is the `websockets` library's sans-I/O protocol: it checks the
handshake (version 13, a key), that client frames are masked, and answers pings.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

from reconciler.sim.kube.pod_log import KubeletCaller
from reconciler.sim.kube.spdy import SpdyClient
from reconciler.sim.kube.status import ApiError
from reconciler.sim.kube.tls_turns import Turns
from reconciler.sim.kube.upgrade import (
    header,
    proxy,
    refusal,
    request_upgrade,
    status_in,
    upgraded_to_spdy,
    versions,
)

V5 = "v5.channel.k8s.io"
TUNNEL_PREFIX = "SPDY/3.1+"
# What client-go's SPDY executor offers a kubelet, in its order.
EXEC_SPDY_PROTOCOLS = (
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
)
STDIN, STDOUT, STDERR, STATUS, RESIZE, CLOSE_SIGNAL = 0, 1, 2, 3, 4, 255
_CHUNK = 64 * 1024
# gorilla/websocket (kubectl) splits nothing larger than its buffers; a tunnelled SPDY
# frame is at most 16 MiB.
_MAX_MESSAGE = 16 * 1024 * 1024
# client-go waits this long for the kubelet to answer each stream it opens.
_STREAM_REPLY_SECONDS = 30.0
# How long the finished session waits for kubectl to close (the real one: 15 minutes).
_FINISH_SECONDS = 60.0

SUCCESS: dict[str, Any] = {"metadata": {}, "status": "Success"}


def websocket_protocols(headers: Any) -> list[str]:
    values = headers.get_all("Sec-WebSocket-Protocol") or []
    return [p.strip() for value in values for p in value.split(",") if p.strip()]


def tunnelled_protocols(headers: Any) -> list[str]:
    """The SPDY protocols a tunnelling client offers, without the prefix."""
    return [
        p.removeprefix(TUNNEL_PREFIX)
        for p in websocket_protocols(headers)
        if p.startswith(TUNNEL_PREFIX) and p.endswith(".k8s.io")
    ]


def serve_websocket(
    handler: Any,
    sim: KubeletCaller,
    subresource: str,
    target: tuple,
    flags: dict[str, bool],
    record: Callable[[int], None],
) -> None:
    """Answer a checked exec or port-forward that asks for a WebSocket (see the module's
    header). `record` logs the status just before it is sent; a refusal before the
    WebSocket is accepted is raised as an ApiError."""
    offered = websocket_protocols(handler.headers)
    if subresource == "exec" and V5 in offered:
        ws = WebSocket.accept(handler, [V5], record)
        if ws is not None:
            translate_exec(ws, flags, lambda: _translator_upgrade(sim, target))
    elif subresource == "portforward" and any(p.startswith(TUNNEL_PREFIX) for p in offered):
        _tunnel(handler, sim, target, record)
    else:  # any other WebSocket goes to the kubelet as it came
        lines = [f"{k}: {v}" for k, v in handler.headers.items() if _passed_on(k)]
        proxy(handler, sim, target, lines, record, handler.command)


def _translator_upgrade(sim: KubeletCaller, target: tuple) -> tuple[ssl.SSLSocket, bytes, str]:
    """The SPDY upgrade client-go's executor asks of the kubelet for the translator."""
    try:
        upstream, status, head, rest = request_upgrade(
            sim, target, "POST", ["Upgrade: SPDY/3.1", *versions(EXEC_SPDY_PROTOCOLS)]
        )
    except ApiError as error:
        raise UpgradeRefused(internal_error(error.message)) from error
    if status != 101:
        text = refusal(upstream, status, head, rest).message
        sent = status_in(text)  # client-go keeps a kubelet's own Status as it is
        raise UpgradeRefused(sent or internal_error(f"unable to upgrade connection: {text}"))
    if not upgraded_to_spdy(head):
        upstream.close()
        missing = "unable to upgrade connection: missing upgrade headers"
        raise UpgradeRefused(internal_error(missing))
    return upstream, rest, header(head, "X-Stream-Protocol-Version")


def _tunnel(handler: Any, sim: KubeletCaller, target: tuple, record: Callable[[int], None]) -> None:
    offered = tunnelled_protocols(handler.headers)
    if not offered:
        raise ApiError(400, "unable to upgrade: no tunneling spdy protocols provided")
    upstream, status, head, rest = request_upgrade(
        sim, target, "POST", ["Upgrade: SPDY/3.1", *versions(offered)]
    )
    if status != 101:
        raise refusal(upstream, status, head, rest)
    if not upgraded_to_spdy(head):
        upstream.close()
        raise ApiError(500, "unable to upgrade: missing upgrade headers in response")
    chosen = header(head, "X-Stream-Protocol-Version")
    ws = WebSocket.accept(handler, [TUNNEL_PREFIX + chosen] if chosen else [], record)
    if ws is None:
        upstream.close()
        return
    tunnel(ws, upstream, rest)


def _passed_on(name: str) -> bool:
    name = name.lower()
    return name in ("upgrade", "x-stream-protocol-version") or name.startswith("sec-websocket-")


class WebSocket:
    """An accepted WebSocket on the handler's connection: one thread reads `messages`,
    any thread may `send`."""

    def __init__(self, sock: Any, read: Callable[[int], bytes], protocol: ServerProtocol):
        # Read by one thread, written by others: over TLS they take turns.
        self._conn, self._protocol = Turns(sock, read), protocol
        self._lock = threading.Lock()

    @classmethod
    def accept(
        cls, handler: Any, subprotocols: list[str], record: Callable[[int], None]
    ) -> WebSocket | None:
        """Answer the handshake (`record` logs its status first); the WebSocket if it
        was accepted."""
        if handler.command != "GET":
            record(405)
            handler.send_error(405, "websocket: the client is not using the GET method")
            return None
        protocol = ServerProtocol(max_size=_MAX_MESSAGE)
        # The request again, through the protocol's own parser: it checks it, and the
        # protocol then reads frames.
        lines = [handler.requestline, *(f"{k}: {v}" for k, v in handler.headers.items())]
        protocol.receive_data(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        events = protocol.events_received()
        if not events or not isinstance(request := events[0], Request):
            record(400)  # unparsable: the protocol has its 400 ready
            ws = cls(handler.connection, handler.rfile.read1, protocol)
            with ws._lock:
                ws._flush()
            return None
        # Chosen here, not by the library: a tunnelling subprotocol (SPDY/3.1+...) is no
        # RFC 7230 token, which the library refuses and Go's servers take.
        del request.headers["Sec-WebSocket-Protocol"]
        offered = websocket_protocols(handler.headers)
        chosen = next((p for p in subprotocols if p in offered), None)
        response = protocol.accept(request)
        if response.status_code == 101 and chosen:
            response.headers["Sec-WebSocket-Protocol"] = chosen
        record(response.status_code)
        protocol.send_response(response)
        ws = cls(handler.connection, handler.rfile.read1, protocol)
        with ws._lock:
            ws._flush()
        return ws if response.status_code == 101 else None

    def send(self, payload: bytes) -> bool:
        """Send one binary message; False once the connection is gone or closing."""
        with self._lock:
            if self._protocol.state is not State.OPEN:
                return False
            self._protocol.send_binary(payload)
            return self._flush()

    def close(self) -> None:
        with self._lock:
            if self._protocol.state is State.OPEN:
                self._protocol.send_close(1000)
                self._flush()

    def messages(self) -> Iterator[bytes]:
        """Each data message once whole, until the peer closes or the connection ends."""
        parts: list[bytes] = []
        while True:
            try:
                data = self._conn.recv(_CHUNK)
            except (OSError, ValueError):
                data = b""
            with self._lock:
                if data:
                    self._protocol.receive_data(data)
                else:
                    self._protocol.receive_eof()
                frames = self._protocol.events_received()
                self._flush()
            for frame in frames:
                if not isinstance(frame, Frame):
                    continue
                if frame.opcode is Opcode.CLOSE:
                    return
                if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                    parts.append(bytes(frame.data))
                    if frame.fin:
                        yield b"".join(parts)
                        parts = []
            if not data or self._protocol.state is State.CLOSED:
                return

    def _flush(self) -> bool:
        try:
            for chunk in self._protocol.data_to_send():
                if chunk:
                    self._conn.sendall(chunk)
                else:  # the protocol's end of our side: TCP's, not TLS's (see splice)
                    socket.socket.shutdown(self._conn.sock, socket.SHUT_WR)
        except OSError:
            return False
        return True


# exec: WebSocket v5 to SPDY ---------------------------------------------------------


def translate_exec(
    ws: WebSocket,
    flags: dict[str, bool],
    open_spdy: Callable[[], tuple[socket.socket, bytes, str]],
) -> None:
    """Serve one translated exec on an accepted v5 WebSocket. `open_spdy` asks the
    kubelet for the upgrade: (connection, bytes already read past the 101, negotiated
    protocol), or raises UpgradeRefused."""
    lowest = STDOUT if flags["output"] else STDERR if flags["error"] else STATUS
    if not ws.send(bytes([lowest])):
        return
    try:
        sock, rest, negotiated = open_spdy()
    except UpgradeRefused as refused:
        drain = threading.Thread(target=lambda: [*ws.messages()], daemon=True)
        drain.start()
        _finish(ws, refused.status, drain)
        return
    session = _ExecSession(ws, flags)
    client = SpdyClient(sock, rest, session.on_data)
    session.attach(client)
    reader = threading.Thread(target=session.read_client, name="kube-sim-ws", daemon=True)
    try:
        client.start()
        opened = session.open_streams()
        reader.start()  # after the streams: until then kubectl's stdin waits in the socket
        if opened:
            session.done.wait()
            status = session.status(negotiated)
        else:
            status = internal_error("timed out waiting for the kubelet to answer the streams")
        _finish(ws, status, reader)
    finally:
        client.close()


class UpgradeRefused(Exception):
    """The kubelet did not upgrade: `status` is what the translator reports for it."""

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message", ""))
        self.status = status


class _ExecSession:
    """The streams of one translated exec, fed by both connections' reader threads."""

    def __init__(self, ws: WebSocket, flags: dict[str, bool]) -> None:
        self._ws, self._flags = ws, flags
        self._client: SpdyClient | None = None
        self._ids: dict[str, int] = {}
        self._error = b""
        self._pending: set[int] = set()
        self._lock = threading.Lock()
        self._resize_buffer = ""
        self._stdin_closed = False
        self.done = threading.Event()

    def attach(self, client: SpdyClient) -> None:
        self._client = client

    def open_streams(self) -> bool:
        assert self._client is not None
        kinds = ["error"]
        kinds += ["stdin"] if self._flags["input"] else []
        kinds += ["stdout"] if self._flags["output"] else []
        kinds += ["stderr"] if self._flags["error"] and not self._flags["tty"] else []
        kinds += ["resize"] if self._flags["tty"] else []
        for kind in kinds:
            with self._lock:
                stream_id = self._client.open_stream({"streamType": kind})
                self._ids[kind] = stream_id
                if kind in ("error", "stdout", "stderr"):
                    self._pending.add(stream_id)
        return self._client.wait_replies(list(self._ids.values()), _STREAM_REPLY_SECONDS)

    def on_data(self, stream_id: int, data: bytes, fin: bool) -> None:
        with self._lock:
            kind = next((k for k, i in self._ids.items() if i == stream_id), "")
            if kind == "error":
                self._error += data
        channel = {"stdout": STDOUT, "stderr": STDERR}.get(kind)
        if channel is not None and data:
            self._ws.send(bytes([channel]) + data)
        if fin:
            with self._lock:
                self._pending.discard(stream_id)
                if not self._pending:
                    self.done.set()

    def read_client(self) -> None:
        """kubectl's messages: stdin, its end, and terminal sizes, until it closes."""
        assert self._client is not None
        for message in self._ws.messages():
            if not message:
                continue
            channel, data = message[0], message[1:]
            if channel == CLOSE_SIGNAL:
                if len(data) != 1:  # a protocol error: wsstream stops reading
                    break
                if data[0] == STDIN:
                    self._end_stdin()
            elif channel == STDIN and "stdin" in self._ids and not self._stdin_closed:
                self._send("stdin", data)
            elif channel == RESIZE and "resize" in self._ids:
                for size in self._sizes(data.decode("utf-8", "replace")):
                    self._send("resize", size)
        self._end_stdin()
        if not self.done.is_set():  # kubectl went away: so does the command
            self._client.close()

    def _end_stdin(self) -> None:
        if "stdin" in self._ids and not self._stdin_closed:
            self._stdin_closed = True
            self._send("stdin", b"", fin=True)

    def _send(self, kind: str, data: bytes, fin: bool = False) -> None:
        assert self._client is not None
        with contextlib.suppress(OSError):  # the kubelet's end shows on its streams
            self._client.send(self._ids[kind], data, fin)

    def _sizes(self, text: str) -> Iterator[bytes]:
        """Each whole JSON size in kubectl's resize messages, as client-go's SPDY side
        encodes it again (one object and a newline)."""
        self._resize_buffer += text
        decoder = json.JSONDecoder()
        while self._resize_buffer.strip():
            try:
                size, end = decoder.raw_decode(self._resize_buffer.lstrip())
            except ValueError:
                return
            self._resize_buffer = self._resize_buffer.lstrip()[end:]
            if isinstance(size, dict):
                width, height = size.get("Width", 0), size.get("Height", 0)
                size = {"Width": width, "Height": height}
                yield json.dumps(size, separators=(",", ":")).encode() + b"\n"

    def status(self, negotiated: str) -> dict[str, Any]:
        return exec_status(self._error, negotiated)


def exec_status(message: bytes, negotiated: str) -> dict[str, Any]:
    """What the translator writes on channel 3 for the kubelet's error stream: read as
    client-go's decoder for the negotiated version reads it, then turned into a Status."""
    if not message:
        return SUCCESS
    text = message.decode("utf-8", "replace")
    if negotiated not in ("v4.channel.k8s.io", "v5.channel.k8s.io"):
        return internal_error(f"error executing remote command: {text}")
    try:
        status = json.loads(text)
    except ValueError as exc:
        return internal_error(f"error stream protocol error: {exc} in {text!r}")
    if status.get("status") == "Success":
        return SUCCESS
    if status.get("status") != "Failure":
        return internal_error("error stream protocol error: unknown error")
    if status.get("reason") != "NonZeroExitCode":
        return internal_error(str(status.get("message", "")))
    if not status.get("details"):
        return internal_error("error stream protocol error: details must be set")
    for cause in status["details"].get("causes") or []:
        if cause.get("reason") == "ExitCode":
            code = str(cause.get("message", ""))
            if not code.isdigit() or int(code) > 255:
                return internal_error(
                    f'error stream protocol error: invalid exit code value "{code}"'
                )
            return exit_status(int(code))
    return internal_error("error stream protocol error: no ExitCode cause given")


def exit_status(code: int) -> dict[str, Any]:
    return {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: "
        f"command terminated with exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def internal_error(message: str) -> dict[str, Any]:
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {message}",
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    }


def _finish(ws: WebSocket, status: dict[str, Any], reader: threading.Thread) -> None:
    """The status on channel 3, a close frame, then wait for kubectl (whose messages
    `reader` reads) to close: it reads everything before it does."""
    ws.send(bytes([STATUS]) + json.dumps(status, separators=(",", ":")).encode())
    ws.close()
    reader.join(_FINISH_SECONDS)


# port-forward: SPDY tunnelled in WebSocket messages ---------------------------------


def tunnel(ws: WebSocket, upstream: socket.socket, rest: bytes) -> None:
    """Carry the kubelet's SPDY bytes in binary messages, and kubectl's messages back as
    bytes, until either side ends."""

    far = Turns(upstream)  # read by `down`, written here

    def down() -> None:
        if rest:
            ws.send(rest)
        with contextlib.suppress(OSError):
            while data := far.recv(_CHUNK):
                if not ws.send(data):
                    break
        ws.close()

    thread = threading.Thread(target=down, name="kube-sim-tunnel", daemon=True)
    thread.start()
    with contextlib.suppress(OSError):
        for message in ws.messages():
            far.sendall(message)
    far.end()
    thread.join()
    upstream.close()
