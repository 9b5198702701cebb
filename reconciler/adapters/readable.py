"""Whether a socket has something to read (or has hung up), waiting up to a timeout.

`select.select` refuses a descriptor numbered 1024 (FD_SETSIZE) or more with a
ValueError, and a busy reconciler's sockets reach such numbers: its watches, streams,
log follows and SSH sessions, or simply a long test run. `poll` has no such limit.
"""

from __future__ import annotations

import math
import select
import socket


def readable(sock: socket.socket, timeout: float) -> bool:
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(math.ceil(max(0.0, timeout) * 1000)))
