"""One pod's way to the cluster's Services: its SSH connection to the instance, a remote
forward (`tcpip-forward`, RFC 4254 §7.1) on the instance's 127.0.0.1 per Service port,
and the Services' names in its `/etc/hosts`.

sshd opens a `forwarded-tcpip` channel for each connection a process of the pod makes
to a forwarded port; the reconciler then dials a ready backend of that Service and
carries the bytes (`splice`), a thread per connection, at most `Slots.limit` at once
(more are closed at once). The connection is the reconciler's: when it breaks (the
instance's network, a restart of the reconciler, a new leader) the pod's open
connections drop, and the next sync makes it again, with its forwards and hosts block.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Sequence

import paramiko

from reconciler.adapters.ssh.client import CONNECT_SECONDS, SshError
from reconciler.core.translate.service_hosts import INSTALL_COMMAND
from reconciler.core.translate.service_links import LOOPBACK, ServicePort
from reconciler.runtime.services.splice import Slots, splice

log = logging.getLogger(__name__)

Dial = Callable[[ServicePort], socket.socket]
"""A connected socket to a ready backend of the Service port, or OSError."""


class PodTunnel:
    """The forwards and hosts block of one pod, on one SSH transport."""

    def __init__(self, pod: str, transport: paramiko.Transport, dial: Dial, slots: Slots) -> None:
        self.pod = pod
        self.transport = transport
        self._dial = dial
        self.slots = slots
        self._by_port: dict[int, ServicePort] = {}
        self._hosts = ""

    @property
    def alive(self) -> bool:
        return self.transport.is_active()

    @property
    def forwarded(self) -> dict[int, ServicePort]:
        """The instance's forwarded ports and the Service port each leads to."""
        return dict(self._by_port)

    def apply(self, ports: Sequence[ServicePort], hosts_block: str) -> list[str]:
        """Forward exactly `ports` and install the hosts block if it changed; returns
        what could not be forwarded (a port the instance already uses), for an Event."""
        wanted = {listen: port for port in ports for listen in port.listen_ports}
        for listen in set(self._by_port) - set(wanted):
            self.transport.cancel_port_forward(LOOPBACK, listen)
            del self._by_port[listen]
        failed = []
        for listen, port in sorted(wanted.items()):
            if self._by_port.get(listen) == port:
                continue
            if listen in self._by_port:
                self._by_port[listen] = port  # the same listener, another Service's now
                continue
            try:
                self.transport.request_port_forward(LOOPBACK, listen, self._accepted)
            except paramiko.SSHException:
                if listen == port.local_port:  # the Service's own port is a bonus: no word
                    failed.append(
                        f"{port.namespace}/{port.service}:{port.port} on {LOOPBACK}:{listen}"
                    )
                continue
            self._by_port[listen] = port
        if hosts_block != self._hosts:
            install_hosts(self.transport, hosts_block)
            self._hosts = hosts_block
        return failed

    def close(self) -> None:
        self.transport.close()

    def _accepted(
        self, channel: paramiko.Channel, origin: tuple[str, int], server: tuple[str, int]
    ) -> None:
        """Called on paramiko's transport thread: the work goes to a thread of its own."""
        port = self._by_port.get(int(server[1]))
        if port is None or not self.slots.take():
            if port is not None:
                log.warning(
                    "pod %s: too many connections through its tunnels; one refused", self.pod
                )
            channel.close()
            return
        threading.Thread(
            target=self._carry, args=(channel, port), name=f"tunnel-{self.pod}", daemon=True
        ).start()

    def _carry(self, channel: paramiko.Channel, port: ServicePort) -> None:
        try:
            try:
                sock = self._dial(port)
            except OSError as exc:
                log.info(
                    "pod %s: Service %s/%s port %d has no backend to reach: %s",
                    self.pod,
                    port.namespace,
                    port.service,
                    port.port,
                    exc,
                )
                channel.close()
                return
            splice(channel, sock)
        finally:
            self.slots.give_back()


def install_hosts(transport: paramiko.Transport, block: str) -> None:
    """Write the block into the instance's /etc/hosts in place; SshError if it failed."""
    channel = transport.open_session(timeout=CONNECT_SECONDS)
    try:
        channel.settimeout(CONNECT_SECONDS)
        channel.exec_command(INSTALL_COMMAND)
        channel.sendall(block.encode())
        channel.shutdown_write()
        while channel.recv(4096):
            pass
        code = channel.recv_exit_status()
    except (OSError, paramiko.SSHException) as exc:
        raise SshError(f"could not write /etc/hosts: {exc}") from None
    finally:
        channel.close()
    if code != 0:
        raise SshError(f"writing /etc/hosts exited {code}")
