"""Remote forwarding (`tcpip-forward`, RFC 4254 §7.1) in a simulated pod's sshd.

The listener is made where OpenSSH's sshd would make it (`netns.bind_address`:
loopback unless `GatewayPorts` says otherwise), inside the pod's own network namespace,
so a process of the pod reaches it and nothing of the machine does. Each connection to
it opens a `forwarded-tcpip` channel to the client carrying the address and port the
client asked for (as OpenSSH does), and the bytes go both ways until either end closes.
A port of 0 gets a free port, which the reply carries; a port already taken is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Sequence
from typing import Any

import asyncssh

from reconciler.sim.runpod.netns import PodNetwork, bind_address

_READ = 65536


class RemoteForward(asyncssh.SSHListener):
    """One `tcpip-forward` of one connection."""

    def __init__(self, servers: Sequence[asyncio.AbstractServer], port: int) -> None:
        self._servers = servers
        self._port = port

    def get_port(self) -> int:
        return self._port

    def close(self) -> None:
        for server in self._servers:
            server.close()

    async def wait_closed(self) -> None:
        for server in self._servers:
            await server.wait_closed()


async def open_forward(
    conn: asyncssh.SSHServerConnection,
    network: PodNetwork,
    gateway_ports: str,
    listen_host: str,
    listen_port: int,
) -> RemoteForward | bool:
    """The listener for a `tcpip-forward`, or False when it cannot bind (the reply is
    then a failure, as sshd's)."""
    sockets: list[socket.socket] = []
    port = listen_port
    try:
        for host in bind_address(listen_host, gateway_ports):
            sockets.append(network.listen(host, port))
            port = sockets[-1].getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        return False

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("", 0)
        try:
            chan_reader, chan_writer = await conn.open_connection(
                listen_host, port, str(peer[0]), int(peer[1])
            )
        except (asyncssh.Error, OSError):
            writer.close()
            return
        await asyncio.gather(_pump(reader, chan_writer), _pump(chan_reader, writer))

    servers = [await asyncio.start_server(accepted, sock=sock) for sock in sockets]
    return RemoteForward(servers, port)


async def _pump(reader: Any, writer: Any) -> None:
    with contextlib.suppress(OSError, asyncssh.Error, ConnectionError):
        while data := await reader.read(_READ):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, asyncssh.Error, ConnectionError):
        if writer.can_write_eof():
            writer.write_eof()
        else:
            writer.close()
