"""The server side of a SPDY session over a socket pair, driven by a client made of the
same frame codec: every stream the client opens is answered and handed out with its
headers; data and FIN flow both ways; a client's ping is echoed; RST_STREAM ends a
stream; a stream opened out of order is a protocol error (GOAWAY); the end of the
connection ends every stream and `accept()`; a stalled reader holds the client back."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from reconciler.adapters.spdy import frames as f
from reconciler.adapters.spdy import session as spdy_session
from reconciler.adapters.spdy.session import Session

WAIT = 10  # seconds; only a broken session ever waits this long


class Client:
    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.encoder = sock, f.FrameEncoder()
        self.decoder = f.FrameDecoder(self._read_exact)
        self.sock.settimeout(WAIT)

    def send(self, *frames: f.Frame) -> None:
        for frame in frames:
            self.sock.sendall(self.encoder.encode(frame))

    def next(self) -> f.Frame:
        return self.decoder.next()

    def _read_exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data


@pytest.fixture
def pair() -> Iterator[tuple[Session, Client]]:
    ours, theirs = socket.socketpair()
    server = Session(ours).start()
    yield server, Client(theirs)
    server.close()
    theirs.close()
    ours.close()


def test_a_stream_is_answered_and_handed_out_with_its_headers(pair):
    server, client = pair
    client.send(f.SynStream(1, {"streamtype": ["stdin"]}))
    assert client.next() == f.SynReply(1, {})
    stream = server.accept(WAIT)
    assert stream is not None
    assert (stream.id, stream.header("streamType")) == (1, "stdin")


def test_data_flows_both_ways_and_fin_ends_each_half(pair):
    server, client = pair
    client.send(f.SynStream(1, {"streamtype": ["stdin"]}))
    client.next()
    stream = server.accept(WAIT)
    client.send(f.Data(1, b"hello "), f.Data(1, b"world", fin=True))
    assert stream.read_all() == b"hello world"
    stream.write(b"x" * 70_000)
    stream.close()
    got = b""
    while True:
        frame = client.next()
        assert isinstance(frame, f.Data)
        got += frame.data
        if frame.fin:
            break
    assert got == b"x" * 70_000


def test_a_syn_stream_with_fin_has_nothing_to_read(pair):
    server, client = pair
    client.send(f.SynStream(1, {"streamtype": ["error"]}, fin=True))
    assert server.accept(WAIT).read(WAIT) == b""


def test_a_clients_ping_is_echoed_and_settings_are_passed_over(pair):
    _, client = pair
    client.send(f.Settings(((0, 7, 65536),)), f.WindowUpdate(0, 1000), f.Ping(7))
    assert client.next() == f.Ping(7)


def test_rst_stream_ends_a_stream_and_data_after_it_is_refused(pair):
    server, client = pair
    client.send(f.SynStream(1, {}))
    client.next()
    stream = server.accept(WAIT)
    client.send(f.RstStream(1, f.CANCEL))
    assert stream.read(WAIT) == b""
    client.send(f.Data(1, b"late"))
    assert client.next() == f.RstStream(1, f.INVALID_STREAM)


def test_data_after_the_clients_fin_is_refused(pair):
    _, client = pair
    client.send(f.SynStream(1, {}, fin=True))
    client.next()
    client.send(f.Data(1, b"late"))
    assert client.next() == f.RstStream(1, f.STREAM_ALREADY_CLOSED)


def test_a_stream_opened_out_of_order_is_a_protocol_error(pair):
    server, client = pair
    client.send(f.SynStream(3, {}))
    client.next()
    client.send(f.SynStream(1, {}))
    assert client.next() == f.GoAway(3, f.GOAWAY_PROTOCOL_ERROR)
    assert server.wait(WAIT)


def test_an_even_stream_id_is_a_protocol_error(pair):
    _, client = pair
    client.send(f.SynStream(2, {}))
    assert client.next() == f.GoAway(0, f.GOAWAY_PROTOCOL_ERROR)


def test_the_connections_end_ends_every_stream_and_accept(pair):
    server, client = pair
    client.send(f.SynStream(1, {}))
    client.next()
    stream = server.accept(WAIT)
    client.sock.shutdown(socket.SHUT_WR)
    assert stream.read(WAIT) == b""
    assert server.accept(WAIT) is None
    assert server.accept(WAIT) is None  # and keeps saying so


def test_close_says_goaway_with_the_last_stream(pair):
    server, client = pair
    client.send(f.SynStream(5, {}))
    client.next()
    server.close()
    assert client.next() == f.GoAway(5, f.GOAWAY_OK)
    with pytest.raises(ConnectionError):
        server.send(f.Ping(2))


def test_a_stalled_reader_holds_the_client_back(pair, monkeypatch):
    monkeypatch.setattr(spdy_session, "BUFFER_LIMIT", 10)
    server, client = pair
    client.send(f.SynStream(1, {}), f.SynStream(3, {}))
    client.next(), client.next()
    first, second = server.accept(WAIT), server.accept(WAIT)
    # stream 1's buffer is full after the first frame: the reader waits for it to be
    # read, so stream 3's data is not taken in until then
    client.send(f.Data(1, b"0123456789"), f.Data(1, b"more"), f.Data(3, b"other"))
    assert second.read(0.2) is None
    assert first.read(WAIT) == b"0123456789"
    assert second.read(WAIT) == b"other"
