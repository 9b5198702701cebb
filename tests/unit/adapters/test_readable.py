"""Waiting for a socket works for any descriptor number: `select.select` refuses those
from 1024 on, which a busy reconciler's sockets (or a long test run's) reach, and exec,
port-forward and log follows then failed with "filedescriptor out of range"."""

from __future__ import annotations

import os
import resource
import socket
from collections.abc import Iterator

import pytest

from reconciler.adapters.readable import readable
from reconciler.adapters.spdy.duplex import Duplex

HIGH = 1500


@pytest.fixture
def high_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair whose first socket's descriptor is above FD_SETSIZE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= HIGH:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * HIGH), hard))
    near, far = socket.socketpair()
    os.dup2(near.fileno(), HIGH)
    high = socket.socket(fileno=HIGH)
    near.close()
    try:
        yield high, far
    finally:
        high.close()
        far.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_socket_numbered_past_1024_is_waited_for(
    high_pair: tuple[socket.socket, socket.socket],
) -> None:
    high, far = high_pair
    assert high.fileno() >= 1024
    assert not readable(high, 0.01)
    far.sendall(b"x")
    assert readable(high, 1)


def test_the_streams_duplex_reads_from_such_a_socket(
    high_pair: tuple[socket.socket, socket.socket],
) -> None:
    high, far = high_pair
    duplex = Duplex(high)
    assert duplex.recv(16, timeout=0.01) is None
    far.sendall(b"hello")
    assert duplex.recv(16, timeout=1) == b"hello"
