"""`kubectl port-forward` to a pod on RunPod: the API server's SPDY streams, each pair
carried by an SSH direct-tcpip channel to the pod's own loopback port.

    /portForward/{namespace}/{pod}

The client opens two streams per connection, `error` and `data`, with the same
`requestID` and the pod's `port`; the data stream's bytes go to `localhost:<port>` in
the instance and back, and a failure is written on the error stream as a kubelet writes
it (`error forwarding port 8888 to pod ...: ...`). One SSH connection serves the whole
session. RunPod's SSH proxy cannot forward; this needs the pod's published 22/tcp.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import paramiko

from reconciler.adapters.spdy.session import Session, Stream
from reconciler.adapters.ssh.client import CONNECT_SECONDS, SshConnector
from reconciler.core.node import remotecommand as rc
from reconciler.runtime.kubelet.exec import Target, Upgrader, handshake, reach

log = logging.getLogger(__name__)

MAX_FORWARDS = 32
"""Connections one session forwards at once (two threads and two streams each); the
session holds at most twice as many streams, so one more is refused (RST_STREAM) until
one ends, and kubectl reports that connection as failed."""
_READ = 32 * 1024


def serve_port_forward(
    http: Upgrader, headers: Any, pod: str, target: Callable[[], Target], ssh: SshConnector
) -> None:
    protocol = handshake(http, headers, rc.PORT_FORWARD_PROTOCOLS)
    if protocol is None:
        return None
    reached = reach(http, target, ssh, "port-forward")
    if reached is None:
        return None
    transport = reached[0]
    try:
        _serve(http.upgrade(protocol), pod, transport)
    finally:
        transport.close()
    return None


def _serve(session: Session, pod: str, transport: paramiko.Transport) -> None:
    """Pairs streams by requestID as they come, until the client ends the session."""
    pairs: dict[str, dict[str, Stream]] = {}
    while (stream := session.accept()) is not None:
        kind = stream.header("streamType")
        if kind not in (rc.STREAM_ERROR, rc.STREAM_DATA):
            stream.reset()
            continue
        pair = pairs.setdefault(stream.header("requestID"), {})
        if kind in pair:  # a second stream of one kind for one request: the first goes
            _drop(pair.pop(kind))
        pair[kind] = stream
        if len(pair) == 2:
            del pairs[stream.header("requestID")]
            threading.Thread(
                target=_forward,
                args=(pair[rc.STREAM_DATA], pair[rc.STREAM_ERROR], pod, transport),
                name="port-forward",
                daemon=True,
            ).start()
        elif len(pairs) > MAX_FORWARDS:  # halves never matched: the oldest go
            for unmatched in pairs.pop(next(iter(pairs))).values():
                _drop(unmatched)
    session.close()


def _drop(stream: Stream) -> None:
    with contextlib.suppress(ConnectionError):
        stream.reset()


def _forward(data: Stream, error: Stream, pod: str, transport: paramiko.Transport) -> None:
    port_text = data.header("port")
    try:
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError(port_text)
        channel = transport.open_channel(
            "direct-tcpip", ("localhost", port), ("127.0.0.1", 0), timeout=CONNECT_SECONDS
        )
    except (ValueError, paramiko.SSHException, OSError, EOFError) as exc:
        reason = "connection refused" if isinstance(exc, paramiko.ChannelException) else exc
        with contextlib.suppress(ConnectionError):
            error.write(f"error forwarding port {port_text} to pod {pod}: {reason}".encode())
            error.close()
            data.close()
        return
    threading.Thread(target=_upstream, args=(data, channel), daemon=True).start()
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException, ConnectionError):
        while chunk := channel.recv(_READ):
            data.write(chunk)
    channel.close()
    with contextlib.suppress(ConnectionError):
        data.close()
        error.close()


def _upstream(data: Stream, channel: paramiko.Channel) -> None:
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
        while chunk := data.read():
            channel.sendall(chunk)
        channel.shutdown_write()
