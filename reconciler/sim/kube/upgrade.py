"""The API server's HTTP side of a kubelet upgrade: connect with the kubelet client
certificate, ask for the upgrade, read the answer, and splice two connections."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from typing import Any

from reconciler.sim.kube.pod_log import KubeletCaller
from reconciler.sim.kube.status import ApiError
from reconciler.sim.kube.tls_turns import Turns

_MAX_HEAD = 64 * 1024
_MAX_ERROR_BYTES = 50_000
_CHUNK = 64 * 1024


def is_websocket(headers: Any) -> bool:
    return (
        str(headers.get("Upgrade", "")).lower() == "websocket"
        and "upgrade" in str(headers.get("Connection", "")).lower()
    )


def request_upgrade(
    sim: KubeletCaller, target: tuple, method: str, upgrade_lines: list[str]
) -> tuple[ssl.SSLSocket, int, bytes, bytes]:
    """Ask the kubelet for an upgrade: (its connection, status, head, bytes past it)."""
    host, port, path = target
    upstream = _connect(sim, host, port)
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Connection: Upgrade",
        "Content-Length: 0",
        *upgrade_lines,
    ]
    upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head, rest = _read_head(upstream)
    return upstream, int(head.split(b" ", 2)[1]), head, rest


def refusal(upstream: ssl.SSLSocket, status: int, head: bytes, rest: bytes) -> ApiError:
    """The kubelet's refusal, as the error kubectl gets: its code and its words."""
    body = rest + _read_body(upstream, head, len(rest))
    upstream.close()
    text = body.decode("utf-8", "replace").strip()
    return ApiError(status, text or f"the kubelet answered {status}")


def status_in(text: str) -> dict[str, Any] | None:
    with contextlib.suppress(ValueError):
        sent = json.loads(text)
        if isinstance(sent, dict) and sent.get("kind") == "Status":
            return {k: v for k, v in sent.items() if k not in ("kind", "apiVersion")}
    return None


def upgraded_to_spdy(head: bytes) -> bool:
    return (
        "upgrade" in header(head, "Connection").lower()
        and "spdy/3.1" in header(head, "Upgrade").lower()
    )


def header(head: bytes, name: str) -> str:
    wanted = name.lower().encode() + b":"
    for line in head.split(b"\r\n")[1:]:
        if line.lower().startswith(wanted):
            return line.split(b":", 1)[1].strip().decode("latin-1")
    return ""


def versions(versions: Any) -> list[str]:
    return [f"X-Stream-Protocol-Version: {v}" for v in versions]


def _connect(sim: KubeletCaller, host: str, port: int) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=sim.kubelet_ca_file)
    if sim.kubelet_ca_file is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(*sim.kubelet_client_files())
    try:
        raw = socket.create_connection((host, port), timeout=5)
        sock = context.wrap_socket(raw, server_hostname=host)
    except OSError as exc:
        raise ApiError(500, f"error dialing backend: {exc}") from exc
    sock.settimeout(None)
    return sock


def _read_head(sock: ssl.SSLSocket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(_CHUNK)
        if not chunk or len(data) > _MAX_HEAD:
            raise ApiError(500, "the kubelet closed the connection before answering")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _read_body(sock: ssl.SSLSocket, head: bytes, have: int) -> bytes:
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")[1:]
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    body = b""
    while have + len(body) < min(length, _MAX_ERROR_BYTES):
        chunk = sock.recv(_CHUNK)
        if not chunk:
            break
        body += chunk
    return body


def proxy(
    handler: Any,
    sim: KubeletCaller,
    target: tuple,
    lines: list[str],
    record: Any,
    method: str = "POST",
) -> None:
    upstream, status, head, rest = request_upgrade(sim, target, method, lines)
    if status != 101:
        raise refusal(upstream, status, head, rest)
    record(101)
    splice(handler.connection, handler.rfile.read1, upstream, head + b"\r\n\r\n" + rest)


def splice(client: Any, client_read: Any, upstream: ssl.SSLSocket, answer: bytes) -> None:
    """Pass the kubelet's 101 on, then bytes both ways until either side ends, which ends
    both (SPDY needs no half-close, and TLS has none). Each connection is read by one
    thread and written by the other: they take turns (`tls_turns`)."""
    near, far = Turns(client, client_read), Turns(upstream)
    near.sendall(answer)

    def down() -> None:
        with contextlib.suppress(OSError):
            while data := far.recv(_CHUNK):
                near.sendall(data)
        near.end()

    thread = threading.Thread(target=down, name="kube-sim-exec", daemon=True)
    thread.start()
    with contextlib.suppress(OSError, ValueError):
        while data := near.recv(_CHUNK):
            far.sendall(data)
    far.end()
    thread.join()
    upstream.close()
