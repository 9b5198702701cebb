"""The API server's connections that one thread reads while another writes (an upgraded
exec or port-forward, both towards kubectl and towards the kubelet), safe over TLS.

OpenSSL does not allow one SSL object to be used by two threads at once, so a read and a
write at the same moment corrupt records ("bad record MAC", which kubectl reports as
`tls: bad record MAC`). Go's crypto/tls locks each direction apart and has no such
limit, so the simulator must not fail where kube-apiserver does not: over TLS, its reads
and writes take turns under one lock, and a reader waits for bytes outside it. (The
product has its own, `adapters/spdy/duplex.py`: the simulator shares none of its code.)
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

# A bound on one wait outside the lock, should readiness and OpenSSL's buffers disagree.
_POLL_SECONDS = 0.5


class Turns:
    """A socket whose `recv` (one thread) and `sendall` (any) take turns over TLS."""

    def __init__(self, sock: Any, read: Callable[[int], bytes] | None = None) -> None:
        """`read`: an HTTP handler's buffered reader, which may hold bytes already."""
        self.sock = sock
        self._read = read or sock.recv
        self._lock = threading.Lock() if isinstance(sock, ssl.SSLSocket) else None

    def sendall(self, data: bytes) -> None:
        if self._lock is None:
            self.sock.sendall(data)
            return
        with self._lock:
            self.sock.sendall(data)

    def recv(self, size: int) -> bytes:
        if self._lock is None:
            return self._read(size)
        while True:
            with self._lock:
                timeout = self.sock.gettimeout()
                self.sock.settimeout(0)
                try:
                    return self._read(size)
                except (ssl.SSLWantReadError, BlockingIOError):
                    pass  # no whole record yet: wait for more without the lock
                finally:
                    self.sock.settimeout(timeout)
            # poll, not select.select: that refuses descriptors from 1024 on.
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            poller.poll(_POLL_SECONDS * 1000)

    def end(self) -> None:
        """End the TCP connection itself, both ways: `SSLSocket.shutdown` would drop the
        TLS state while the other direction may still be using it."""
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
