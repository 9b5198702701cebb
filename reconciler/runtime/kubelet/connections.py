"""The connections the kubelet endpoint holds: at most `max_connections`, of which at most
`max_unauthenticated` not yet authenticated.

A connection is unauthenticated from its accept until a request on it is authenticated
(a verified client certificate or a bearer token) and authorized: any pod's
ServiceAccount token authenticates, and the caller the node trusts is one with the
rights to its kubelet API (the API server, metrics-server, an administrator). Beyond
`max_unauthenticated`, the oldest unauthenticated connection is closed to make room for
the new one, rather than the new one refused: whoever holds the unauthenticated slots
with slow handshakes and trickled headers cannot keep the API server out, since its
connections complete in milliseconds. So memory before authentication stays within
`max_unauthenticated` times what one request's head may hold (`request_head`). Beyond
`max_connections`, with no unauthenticated connection to close, a new connection is
closed at once, before its handshake, as a kubelet's server does.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Ticket:
    """One admitted connection."""

    sock: socket.socket
    counted: bool = True
    """Still counted among the held (False once released or closed to make room)."""


class Admission:
    """Which connections are held, and which of them are not yet authenticated."""

    def __init__(self, max_connections: int, max_unauthenticated: int) -> None:
        self.max_connections, self.max_unauthenticated = max_connections, max_unauthenticated
        self._held = 0
        self._unauthenticated: OrderedDict[Ticket, None] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, sock: socket.socket) -> Ticket | None:
        """A ticket for a new connection, or None when it must be closed at once."""
        with self._lock:
            full = self._held >= self.max_connections
            if self._unauthenticated and (
                full or len(self._unauthenticated) >= self.max_unauthenticated
            ):
                self._close_oldest()
            if self._held >= self.max_connections:
                return None
            self._held += 1
            ticket = Ticket(sock)
            self._unauthenticated[ticket] = None
            return ticket

    def authenticated(self, ticket: Ticket) -> None:
        """A request on the connection was authenticated: it holds no unauthenticated slot."""
        with self._lock:
            self._unauthenticated.pop(ticket, None)

    def release(self, ticket: Ticket) -> None:
        """The connection's thread ended."""
        with self._lock:
            self._forget(ticket)

    @property
    def held(self) -> int:
        with self._lock:
            return self._held

    @property
    def unauthenticated(self) -> int:
        with self._lock:
            return len(self._unauthenticated)

    def _close_oldest(self) -> None:
        oldest = next(iter(self._unauthenticated))
        log.info("kubelet endpoint: closing the oldest unauthenticated connection for a new one")
        self._forget(oldest)
        # Its thread, blocked reading, wakes to an end of file and lets the socket go.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(oldest.sock, socket.SHUT_RDWR)

    def _forget(self, ticket: Ticket) -> None:
        self._unauthenticated.pop(ticket, None)
        if ticket.counted:
            ticket.counted = False
            self._held -= 1


class EndpointHTTPServer(ThreadingHTTPServer):
    """A thread per admitted connection; `tickets` gives a connection's ticket to its
    handler."""

    daemon_threads = True
    block_on_close = False
    app: Any
    """The `KubeletServer` it serves."""
    admission: Admission

    def __init__(self, address: tuple[str, int], handler: Any, admission: Admission) -> None:
        super().__init__(address, handler)
        self.admission = admission
        self.tickets: dict[Any, Ticket] = {}
        self._tickets_lock = threading.Lock()

    def ticket(self, request: Any) -> Ticket | None:
        with self._tickets_lock:
            return self.tickets.get(request)

    def process_request(self, request: Any, client_address: Any) -> None:
        ticket = self.admission.admit(request)
        if ticket is None:
            log.warning(
                "kubelet endpoint: %s connections held; closing a new one", self.admission.held
            )
            self.shutdown_request(request)
            return
        with self._tickets_lock:
            self.tickets[request] = ticket
        try:
            super().process_request(request, client_address)
        except Exception:
            self._release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def _release(self, request: Any) -> None:
        with self._tickets_lock:
            ticket = self.tickets.pop(request, None)
        if ticket is not None:
            self.admission.release(ticket)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A failed handshake (no or a foreign certificate), a connection closed for a
        new one or a request's head not in time: the caller's problem."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)
