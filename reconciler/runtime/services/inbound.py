"""The cluster's connections to pods on RunPod: a listening port of the reconciler per
Service port and pod (published in the reconciler's EndpointSlices, `service_slices`),
each connection carried to the container's port on the instance's loopback over the
pod's SSH connection (`direct-tcpip`, RFC 4254 §7.2), at most `Slots.limit` at once per
pod (more are closed at once). One thread waits on every listener; each connection has
a thread of its own. A listener lives as long as its pod's tunnel: the ports change when
the reconciler restarts (open connections drop) and the slices are published again.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import selectors
import socket
import threading
from collections.abc import Callable

import paramiko

from reconciler.adapters.ssh.client import CONNECT_SECONDS
from reconciler.core.translate.service_slices import InboundPort
from reconciler.runtime.services.splice import Slots, splice

log = logging.getLogger(__name__)


class Acceptor:
    """One thread accepting on every listener; `add` and `remove` from any thread."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="service-acceptor", daemon=True)
        self._thread.start()

    def add(self, sock: socket.socket, accepted: Callable[[socket.socket], None]) -> None:
        sock.setblocking(False)
        with self._lock:
            self._selector.register(sock, selectors.EVENT_READ, accepted)
        self._wake_w.send(b"x")

    def remove(self, sock: socket.socket) -> None:
        with self._lock, contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        sock.close()

    def close(self) -> None:
        self._stopped = True
        self._wake_w.send(b"x")
        self._thread.join(5)
        self._wake_r.close()
        self._wake_w.close()

    def _run(self) -> None:
        while not self._stopped:
            for key, _ in self._selector.select(timeout=1.0):
                if key.data is None:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    continue
                with contextlib.suppress(OSError):
                    client, _ = key.fileobj.accept()  # type: ignore[union-attr]
                    client.setblocking(True)
                    key.data(client)


class PodInbound:
    """One pod's listeners, over its SSH transport."""

    def __init__(
        self, pod: str, transport: paramiko.Transport, acceptor: Acceptor, slots: Slots, host: str
    ) -> None:
        self.pod = pod
        self._transport = transport
        self._acceptor = acceptor
        self.slots = slots
        self._host = host
        self._listeners: dict[InboundPort, socket.socket] = {}

    def apply(self, ports: list[InboundPort]) -> dict[InboundPort, int]:
        """Listen for exactly `ports`; returns the port each listens on."""
        for gone in set(self._listeners) - set(ports):
            self._acceptor.remove(self._listeners.pop(gone))
        for port in ports:
            if port not in self._listeners:
                sock = socket.create_server((self._host, 0), backlog=128)
                self._listeners[port] = sock
                self._acceptor.add(sock, functools.partial(self._accepted, port=port))
        return {port: sock.getsockname()[1] for port, sock in self._listeners.items()}

    def close(self) -> None:
        for sock in self._listeners.values():
            self._acceptor.remove(sock)
        self._listeners.clear()

    def _accepted(self, client: socket.socket, *, port: InboundPort) -> None:
        if not self.slots.take():
            log.warning("pod %s: too many connections from the cluster; one refused", self.pod)
            client.close()
            return
        threading.Thread(
            target=self._carry, args=(client, port), name=f"inbound-{self.pod}", daemon=True
        ).start()

    def _carry(self, client: socket.socket, port: InboundPort) -> None:
        try:
            try:
                channel = self._transport.open_channel(
                    "direct-tcpip",
                    ("127.0.0.1", port.container_port),
                    client.getpeername()[:2],
                    timeout=CONNECT_SECONDS,
                )
            except (paramiko.SSHException, OSError, EOFError) as exc:
                log.info("pod %s: port %d does not answer: %s", self.pod, port.container_port, exc)
                client.close()
                return
            splice(channel, client)
        finally:
            self.slots.give_back()
