"""A connection that one thread reads while other threads write, safe over TLS.

OpenSSL does not allow one SSL object to be used by two threads at once, a read on one
and a write on the other included (its maintainers, openssl/openssl issue 20446). When
they overlap, TLS records are corrupted: the peer fails with "bad record MAC" (Go's
clients, kubectl among them, say `tls: bad record MAC`) and the session dies. A stress
of both directions at once breaks within a few thousand messages. So over TLS the reads
and the writes take turns under one lock, and the reader waits for bytes outside it.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable

from reconciler.adapters.readable import readable

# The reader waits for the socket outside the lock; this bounds one wait, in case the
# socket's readiness and OpenSSL's buffers ever disagree.
_WAIT_SECONDS = 0.5


class Duplex:
    """`recv` by one thread, `sendall` by any; plain sockets pass straight through."""

    def __init__(self, sock: socket.socket, read: Callable[[int], bytes] | None = None) -> None:
        """`read` reads what the peer sent (default: the socket's own `recv`); an HTTP
        server passes its buffered reader, which may already hold the first bytes."""
        self._sock = sock
        self._read = read or sock.recv
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._lock = threading.Lock()

    def sendall(self, data: bytes) -> None:
        if not self._tls:
            self._sock.sendall(data)
            return
        with self._lock:
            self._sock.sendall(data)

    def recv(self, size: int, timeout: float | None = None) -> bytes | None:
        """Up to `size` bytes, b"" at the end; blocks until some came, or returns None
        once `timeout` seconds passed without any."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._tls:
            if timeout is not None and not readable(self._sock, timeout):
                return None
            return self._read(size)
        while True:
            with self._lock:
                data = self._read_now(size)
            if data is not None:
                return data
            left = _WAIT_SECONDS if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            readable(self._sock, min(left, _WAIT_SECONDS))

    def _read_now(self, size: int) -> bytes | None:
        """What can be read without waiting; None when a whole record has not come yet.
        The socket is non-blocking only while we hold the lock: writers find it as they
        left it."""
        timeout = self._sock.gettimeout()
        self._sock.settimeout(0)
        try:
            return self._read(size)
        except (ssl.SSLWantReadError, BlockingIOError):
            return None
        finally:
            self._sock.settimeout(timeout)
