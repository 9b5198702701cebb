"""The server side of a SPDY session over a socket pair, driven by a client made of the
same frame codec: every stream the client opens is answered and handed out with its
headers; data and FIN flow both ways; a client's ping is echoed; RST_STREAM ends a
stream; a stream opened out of order is a protocol error (GOAWAY); the end of the
connection ends every stream and `accept()`; a stalled reader holds the client back.
Limits: streams beyond the cap, or after the caller took what it needs, are refused and
kept nowhere; the stream table lets go of ended streams; unread bytes are bounded per
stream and per session; a session quiet for its idle limit ends, as does a half frame
followed by silence, and the end runs the caller's hooks."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from reconciler.adapters.spdy import frames as f
from reconciler.adapters.spdy.session import Session, SessionLimits

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
    client.send(f.SettingsFrame(((0, 7, 65536),)), f.WindowUpdate(0, 1000), f.Ping(7))
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


def _pair(limits: SessionLimits) -> tuple[Session, Client, socket.socket]:
    ours, theirs = socket.socketpair()
    return Session(ours, limits=limits).start(), Client(theirs), ours


def test_a_stalled_reader_holds_the_client_back():
    server, client, _ = _pair(SessionLimits(stream_buffer=10))
    client.send(f.SynStream(1, {}), f.SynStream(3, {}))
    client.next(), client.next()
    first, second = server.accept(WAIT), server.accept(WAIT)
    # stream 1's buffer is full after the first frame: the reader waits for it to be
    # read, so stream 3's data is not taken in until then
    client.send(f.Data(1, b"0123456789"), f.Data(1, b"more"), f.Data(3, b"other"))
    assert second.read(0.2) is None
    assert first.read(WAIT) == b"0123456789"
    assert second.read(WAIT) == b"other"


def test_streams_beyond_the_cap_are_refused_and_kept_nowhere():
    server, client, _ = _pair(SessionLimits(max_streams=2))
    client.send(f.SynStream(1, {}), f.SynStream(3, {}), f.SynStream(5, {}))
    assert [client.next() for _ in range(3)] == [
        f.SynReply(1, {}),
        f.SynReply(3, {}),
        f.RstStream(5, f.REFUSED_STREAM),
    ]
    assert server.open_streams == 2
    client.send(f.Data(5, b"x"))
    assert client.next() == f.RstStream(5, f.INVALID_STREAM)
    # a stream that ended both ways leaves the table: room for the next
    first = server.accept(WAIT)
    assert first is not None
    client.send(f.Data(1, b"", fin=True))
    assert first.read(WAIT) == b""
    first.close()
    client.next()  # our FIN
    client.send(f.RstStream(3, f.CANCEL))
    client.send(f.SynStream(7, {}))
    assert client.next() == f.SynReply(7, {})
    assert server.open_streams == 1


def test_streams_after_the_caller_took_its_own_are_refused():
    server, client, _ = _pair(SessionLimits())
    client.send(f.SynStream(1, {}), f.SynStream(3, {}))
    client.next(), client.next()
    assert server.accept(WAIT) is not None
    server.stop_accepting()  # stream 3 was queued, never taken
    assert client.next() == f.RstStream(3, f.REFUSED_STREAM)
    client.send(f.SynStream(5, {}))
    assert client.next() == f.RstStream(5, f.REFUSED_STREAM)
    assert server.open_streams == 1


def test_unread_bytes_of_the_whole_session_are_bounded():
    server, client, _ = _pair(SessionLimits(stream_buffer=1 << 20, session_buffer=100))
    client.send(*(f.SynStream(n, {}) for n in (1, 3, 5)))
    [client.next() for _ in range(3)]
    streams = [server.accept(WAIT) for _ in range(3)]
    client.send(f.Data(1, b"a" * 60), f.Data(3, b"b" * 60), f.Data(5, b"c" * 60))
    assert streams[2].read(0.2) is None  # the reader waits: 120 bytes held, more than 100
    assert server.buffered == 120
    assert streams[0].read(WAIT) == b"a" * 60
    assert streams[2].read(WAIT) == b"c" * 60
    client.send(f.RstStream(3, f.CANCEL))  # what a reset stream held is let go
    deadline = time.monotonic() + WAIT
    while server.buffered and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.buffered == 0
    assert streams[1].read(WAIT) == b""


@pytest.mark.parametrize("half_frame", [b"", b"\x80\x03\x00"])
def test_a_quiet_session_ends_at_its_idle_limit(half_frame):
    server, client, _ = _pair(SessionLimits(idle_timeout=0.5))
    ended = []
    server.on_end(lambda: ended.append(True))
    client.send(f.SynStream(1, {}))
    client.next()
    client.sock.sendall(half_frame)
    assert not server.wait(0.3)
    assert server.wait(WAIT) and ended == [True]
    assert client.next() == f.GoAway(1, f.GOAWAY_OK)
    assert client.sock.recv(1) == b""  # and the connection is closed


def test_frames_either_way_keep_a_session_alive():
    server, client, _ = _pair(SessionLimits(idle_timeout=0.5))
    client.send(f.SynStream(1, {}))
    client.next()
    stream = server.accept(WAIT)
    assert stream is not None
    for _ in range(4):  # 1.2 s, output only
        stream.write(b"out")
        client.next()
        assert not server.wait(0.3)
