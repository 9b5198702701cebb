"""What an API server sends a kubelet for `kubectl exec`: a TLS connection with its
client certificate, an HTTP request asking to upgrade to SPDY/3.1, then one stream per
channel. Built from the project's frame codec; the real kubectl checks the server side
against Go's implementation elsewhere (tests/spdy)."""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlencode

from reconciler.adapters.spdy import frames as f

WAIT = 30.0


@dataclass
class ExecResult:
    status: int
    body: str = ""
    stdout: bytes = b""
    stderr: bytes = b""
    error: bytes = b""
    frames: list[f.Frame] = field(default_factory=list)

    @property
    def exit_status(self) -> dict[str, object]:
        return dict(json.loads(self.error)) if self.error else {}


class ApiServerClient:
    def __init__(self, port: int, cert: tuple[str, str] | None, token: str | None = None):
        self.port, self.cert, self.token = port, cert, token

    def exec(
        self,
        path: str,
        command: list[str],
        *,
        stdin: bytes | None = None,
        tty: bool = False,
        resize: list[tuple[int, int]] = (),  # type: ignore[assignment]
        protocols: tuple[str, ...] = ("v4.channel.k8s.io",),
        stderr: bool = True,
    ) -> ExecResult:
        query = [("command", part) for part in command] + [("output", "1")]
        query += [("error", "1")] if stderr else []
        query += [("input", "1")] if stdin is not None else []
        query += [("tty", "1")] if tty else []
        sock = self._connect()
        headers = [
            f"POST {path}?{urlencode(query)} HTTP/1.1",
            "Host: kubelet",
            "Connection: Upgrade",
            "Upgrade: SPDY/3.1",
            "Content-Length: 0",
        ]
        headers += [f"X-Stream-Protocol-Version: {p}" for p in protocols]
        if self.token:
            headers.append(f"Authorization: Bearer {self.token}")
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        status, body, rest = _response(sock)
        if status != 101:
            sock.close()
            return ExecResult(status, body)
        return _streams(sock, rest, stdin, tty, resize, stderr)

    def _connect(self) -> ssl.SSLSocket:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if self.cert:
            context.load_cert_chain(*self.cert)
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
        return context.wrap_socket(raw)


def _response(sock: ssl.SSLSocket) -> tuple[int, str, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    return status, rest[:length].decode(), rest[length:]


def _streams(
    sock: ssl.SSLSocket,
    rest: bytes,
    stdin: bytes | None,
    tty: bool,
    resize: list[tuple[int, int]],
    stderr: bool,
) -> ExecResult:
    pending = bytearray(rest)

    def read_exact(size: int) -> bytes:
        while len(pending) < size:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError
            pending.extend(chunk)
        data = bytes(pending[:size])
        del pending[:size]
        return data

    encoder, decoder = f.FrameEncoder(), f.FrameDecoder(read_exact)
    kinds = ["error", "stdout"] + (["stderr"] if stderr and not tty else [])
    kinds += (["stdin"] if stdin is not None else []) + (["resize"] if tty else [])
    ids = {kind: 1 + 2 * n for n, kind in enumerate(kinds)}
    for kind, stream_id in ids.items():
        sock.sendall(encoder.encode(f.SynStream(stream_id, {"streamtype": [kind]})))
    for width, height in resize:
        size = json.dumps({"Width": width, "Height": height}).encode()
        sock.sendall(encoder.encode(f.Data(ids["resize"], size)))
    if stdin is not None:
        sock.sendall(encoder.encode(f.Data(ids["stdin"], stdin, fin=True)))
    result, names = ExecResult(101), {v: k for k, v in ids.items()}
    ended: set[str] = set()
    while "error" not in ended:
        frame = decoder.next()
        result.frames.append(frame)
        if isinstance(frame, f.Data):
            name = names[frame.stream_id]
            setattr(result, name, getattr(result, name) + frame.data)
            if frame.fin:
                ended.add(name)
        elif isinstance(frame, f.GoAway):
            break
    sock.close()
    return result
