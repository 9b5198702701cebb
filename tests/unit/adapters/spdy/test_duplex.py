"""One TLS connection read by one thread and written by another at the same time, at both
ends, as the kubelet's SPDY sessions do (`Duplex`) and the Kubernetes simulator's
upgraded connections (`Turns`, its own code). Without the turns `Duplex` takes, OpenSSL may
corrupt records ("bad record mac"), now and then; so the sockets also note every time a
read and a write were inside OpenSSL at once, which happens at once without the turns."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.adapters.spdy.duplex import Duplex
from reconciler.runtime.kubelet.tls import self_signed, server_context
from reconciler.sim.kube.tls_turns import Turns

MESSAGES = 3000
MESSAGE = 1000
ROUNDS = 10


class WatchedTls(ssl.SSLSocket):
    """An SSL socket that notes a read and a write inside OpenSSL at the same time."""

    guard = threading.Lock()
    inside: dict[int, int] = {}
    overlaps: dict[int, int] = {}

    def _enter(self) -> None:
        with self.guard:
            now = self.inside[id(self)] = self.inside.get(id(self), 0) + 1
            if now > 1:
                self.overlaps[id(self)] = self.overlaps.get(id(self), 0) + 1

    def _leave(self) -> None:
        with self.guard:
            self.inside[id(self)] -= 1

    def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
        self._enter()
        try:
            return super().recv(buflen, flags)
        finally:
            self._leave()

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._enter()
        try:
            super().sendall(data, flags)
        finally:
            self._leave()


@pytest.fixture
def tls_pair() -> Iterator[tuple[ssl.SSLSocket, ssl.SSLSocket]]:
    cert, key = self_signed("duplex-node", "127.0.0.1")
    server_ctx = server_context(cert, key, None)
    server_ctx.sslsocket_class = WatchedTls
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.sslsocket_class = WatchedTls
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    with socket.create_server(("127.0.0.1", 0)) as listener:
        accepted: list[ssl.SSLSocket] = []
        acceptor = threading.Thread(
            target=lambda: accepted.append(
                server_ctx.wrap_socket(listener.accept()[0], server_side=True)
            )
        )
        acceptor.start()
        client = client_ctx.wrap_socket(socket.create_connection(listener.getsockname()))
        acceptor.join(timeout=10)
    [server] = accepted
    yield server, client
    server.close()
    client.close()


def _both_ways(end: Duplex | Turns, fill: bytes, errors: list[BaseException]) -> int:
    """Write MESSAGES messages of `fill` from a second thread while this one reads as many
    of the other end's."""

    def write() -> None:
        try:
            for _ in range(MESSAGES):
                end.sendall(fill * MESSAGE)
        except OSError as exc:
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    received = 0
    try:
        while received < MESSAGES * MESSAGE:
            data = end.recv(65536)
            if not data:
                break
            assert fill[0] not in data, "our own bytes came back"
            received += len(data)
    except OSError as exc:
        errors.append(exc)
    writer.join(timeout=60)
    return received


@pytest.mark.parametrize("turns", [Duplex, Turns])
def test_reads_and_writes_at_once_on_one_tls_connection_keep_every_byte(
    tls_pair: tuple[ssl.SSLSocket, ssl.SSLSocket], turns: type[Duplex] | type[Turns]
) -> None:
    server, client = (turns(end) for end in tls_pair)
    for _ in range(ROUNDS):
        errors: list[BaseException] = []
        got: dict[str, int] = {}

        def far_end(got: dict[str, int] = got, errors: list[BaseException] = errors) -> None:
            got["server"] = _both_ways(server, b"s", errors)

        far = threading.Thread(target=far_end)
        far.start()
        got["client"] = _both_ways(client, b"c", errors)
        far.join(timeout=60)
        assert errors == []
        assert got == {"server": MESSAGES * MESSAGE, "client": MESSAGES * MESSAGE}
    assert [WatchedTls.overlaps.get(id(end), 0) for end in tls_pair] == [0, 0]


@pytest.mark.parametrize("turns", [Duplex, Turns])
def test_a_plain_socket_is_read_and_written_directly(turns: type[Duplex] | type[Turns]) -> None:
    left, right = socket.socketpair()
    with left, right:
        turns(left).sendall(b"ping")
        assert turns(right).recv(16) == b"ping"
