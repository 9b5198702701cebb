"""Reading a request's head (its request line and headers) within a deadline and a size.

Before a request is authenticated, whoever connects decides what the endpoint holds. A
per-read idle timeout does not bound that: a client that sends a byte a second is never
idle. So the whole head must arrive by a deadline (`--kubelet-request-header-timeout`,
Go's ReadHeaderTimeout): from the accept for a connection's first request (its TLS
handshake included), from the request's first byte for a kept-alive connection's next
one. And it may hold at most so many headers of so many bytes together (the kubelet's
server caps the head's bytes; Python's own caps are 100 lines of 64 KiB each, which
let one connection hold 6 MiB).
"""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol


class HeadTooLarge(Exception):
    """The head has more headers or bytes than allowed; the message says which."""


class HeadCut(Exception):
    """The connection ended before the head's blank line."""


class DeadlineReader(io.RawIOBase):
    """A connection's bytes; while a deadline is set, no read waits past it."""

    def __init__(self, sock: socket.socket, clock: Callable[[], float] = time.monotonic) -> None:
        self._sock, self._clock = sock, clock
        self._deadline: float | None = None
        self._timeout: float | None = None

    def readable(self) -> bool:
        return True

    def start(self, seconds: float) -> None:
        """The reads from now on end `seconds` from now, at the latest."""
        if self._deadline is None:
            self._timeout = self._sock.gettimeout()
        self._deadline = self._clock() + seconds

    def stop(self) -> None:
        """The head is read: reads wait as the socket's own timeout says again."""
        if self._deadline is not None:
            self._deadline = None
            self._sock.settimeout(self._timeout)

    def readinto(self, buffer: Any) -> int:
        if self._deadline is not None:
            left = self._deadline - self._clock()
            if left <= 0:
                raise TimeoutError("the request's head did not arrive in time")
            if self._timeout is not None:
                left = min(left, self._timeout)
            self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class LineSource(Protocol):
    def readline(self, size: int | None = -1, /) -> bytes: ...


class HeadBudget:
    """The reader a request's headers are parsed from: each line counted against the
    head's budget of lines and bytes, and never read past it."""

    def __init__(self, source: LineSource, max_headers: int, max_bytes: int) -> None:
        self._source = source
        self._lines_left, self._bytes_left = max_headers, max_bytes
        self.max_headers, self.max_bytes = max_headers, max_bytes

    def readline(self, limit: int = -1) -> bytes:
        most = self._bytes_left + 1 if limit < 0 else min(limit, self._bytes_left + 1)
        line = self._source.readline(most)
        if not line:
            raise HeadCut("the connection ended inside the request's headers")
        if len(line) > self._bytes_left:
            raise HeadTooLarge(f"request headers above {self.max_bytes} bytes")
        self._bytes_left -= len(line)
        if line not in (b"\r\n", b"\n"):
            self._lines_left -= 1
            if self._lines_left < 0:
                raise HeadTooLarge(f"more than {self.max_headers} request headers")
        return line
