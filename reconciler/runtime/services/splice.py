"""Moving a connection's bytes between an SSH channel and a TCP socket, both ways, each
direction ending on its own (a half-close goes through), and counting the open ones."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable
from typing import Protocol

_CHUNK = 65536
IDLE_SECONDS = 3600.0
"""A connection that carried nothing either way for this long is closed."""


class Channel(Protocol):
    def fileno(self) -> int: ...
    def recv(self, nbytes: int) -> bytes: ...
    def sendall(self, data: bytes) -> None: ...
    def shutdown_write(self) -> None: ...
    def close(self) -> None: ...


class Slots:
    """At most `limit` connections at once; `take` says whether one more may open."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open = 0
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        return self._open

    def take(self) -> bool:
        with self._lock:
            if self._open >= self.limit:
                return False
            self._open += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._open -= 1


def splice(channel: Channel, sock: socket.socket, idle: float = IDLE_SECONDS) -> None:
    """Carry bytes until both directions ended (or `idle` seconds passed with none),
    then close both ends."""
    poller = select.poll()  # no FD_SETSIZE limit (adapters/readable.py)
    poller.register(channel.fileno(), select.POLLIN)
    poller.register(sock.fileno(), select.POLLIN)
    from_channel = from_socket = True
    try:
        while from_channel or from_socket:
            ready = {fd for fd, _ in poller.poll(int(idle * 1000))}
            if not ready:
                return
            if from_channel and channel.fileno() in ready:
                from_channel = _move(
                    channel.recv, sock.sendall, lambda: sock.shutdown(socket.SHUT_WR)
                )
                if not from_channel:
                    poller.unregister(channel.fileno())
            if from_socket and sock.fileno() in ready:
                from_socket = _move(sock.recv, channel.sendall, channel.shutdown_write)
                if not from_socket:
                    poller.unregister(sock.fileno())
    except OSError:
        return
    finally:
        with contextlib.suppress(OSError):
            sock.close()
        channel.close()


def _move(
    recv: Callable[[int], bytes], send: Callable[[bytes], None], end: Callable[[], None]
) -> bool:
    data = recv(_CHUNK)
    if data:
        send(data)
        return True
    with contextlib.suppress(OSError):
        end()
    return False
