"""The server side of a SPDY/3.1 session: the client opens streams, we answer them.

One reader thread decodes the client's frames and files each stream's data; any thread
may write. Every stream the client opens is answered (SYN_REPLY) at once, as Kubernetes'
own server does, and queued for `accept()`; the caller decides what a stream is for
from its headers and resets those it does not want.

Flow control: SPDY/3.1 windows are neither enforced nor sent, like the Go library every
Kubernetes client and API server uses (which ignores WINDOW_UPDATE); instead a stream
whose unread data passes `BUFFER_LIMIT` stalls the reader thread until it is read, so
a client sending faster than the far end takes is held back by TCP.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
from collections import deque
from collections.abc import Callable

from reconciler.adapters.spdy import frames as f
from reconciler.adapters.spdy.duplex import Duplex
from reconciler.adapters.spdy.headers import HeaderBlockError, Headers

log = logging.getLogger(__name__)

BUFFER_LIMIT = 1 << 20
# Data frames we send stay small enough to interleave the streams of a session.
_CHUNK = 32 * 1024


class Stream:
    """One stream a client opened: its headers, what it sent, and our half."""

    def __init__(self, session: Session, stream_id: int, headers: Headers) -> None:
        self.id, self.headers, self._session = stream_id, headers, session
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._remote_closed = False
        self._local_closed = False
        self._ready = threading.Condition()

    def header(self, name: str) -> str:
        return (self.headers.get(name.lower()) or [""])[0]

    def read(self, timeout: float | None = None) -> bytes | None:
        """The next bytes the client sent; b"" once it closed its half (or the session
        ended); None if nothing came within `timeout`."""
        with self._ready:
            if not self._ready.wait_for(lambda: self._chunks or self._remote_closed, timeout):
                return None
            if not self._chunks:
                return b""
            chunk = self._chunks.popleft()
            self._buffered -= len(chunk)
            self._ready.notify_all()
            return chunk

    def read_all(self) -> bytes:
        parts = []
        while chunk := self.read():
            parts.append(chunk)
        return b"".join(parts)

    def write(self, data: bytes) -> None:
        for start in range(0, len(data), _CHUNK):
            self._session.send(f.Data(self.id, data[start : start + _CHUNK]))

    def close(self) -> None:
        """Closes our half (a FIN); the client's half stays readable."""
        if not self._local_closed:
            self._local_closed = True
            self._session.send(f.Data(self.id, b"", fin=True))

    def reset(self, status: int = f.CANCEL) -> None:
        self._local_closed = True
        self._session.send(f.RstStream(self.id, status))
        self._end_remote()

    def _deliver(self, data: bytes, fin: bool) -> None:
        with self._ready:
            if data:
                self._ready.wait_for(lambda: self._buffered < BUFFER_LIMIT or self._remote_closed)
                self._chunks.append(data)
                self._buffered += len(data)
            self._remote_closed = self._remote_closed or fin
            self._ready.notify_all()

    def _end_remote(self) -> None:
        with self._ready:
            self._remote_closed = True
            self._ready.notify_all()

    @property
    def remote_closed(self) -> bool:
        return self._remote_closed


class Session:
    """Runs from `start()` until the client goes away or `close()`."""

    def __init__(self, sock: socket.socket, recv: Callable[[int], bytes] | None = None) -> None:
        """`recv` reads what the client sent (default: the socket's own); an HTTP server
        passes its buffered reader, which may already hold the first frames."""
        self._sock = sock
        # Our reader thread and the streams' writers share one TLS connection.
        self._conn = Duplex(sock, recv)
        self._pending = bytearray()
        self._encoder = f.FrameEncoder()
        self._write_lock = threading.Lock()
        self._streams: dict[int, Stream] = {}
        self._last_id = 0
        self._incoming: queue.Queue[Stream | None] = queue.Queue()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spdy-session", daemon=True)

    def start(self) -> Session:
        self._thread.start()
        return self

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def accept(self, timeout: float | None = None) -> Stream | None:
        """The next stream the client opened, already answered; None when the session
        ended or nothing came within `timeout`."""
        try:
            stream = self._incoming.get(timeout=timeout)
        except queue.Empty:
            return None
        if stream is None:
            self._incoming.put(None)  # every later accept() learns the end too
        return stream

    def send(self, frame: f.Frame) -> None:
        with self._write_lock:
            if self._closed.is_set():
                raise ConnectionError("the SPDY session is closed")
            data = self._encoder.encode(frame)
            try:
                self._conn.sendall(data)
            except OSError as exc:
                self._end()
                raise ConnectionError(f"the SPDY session broke: {exc}") from exc

    def close(self, status: int = f.GOAWAY_OK) -> None:
        """GOAWAY, then the connection ends; every stream reads its end."""
        with contextlib.suppress(ConnectionError):
            self.send(f.GoAway(self._last_id, status))
        self._end()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def wait(self, timeout: float | None = None) -> bool:
        return self._closed.wait(timeout)

    def _run(self) -> None:
        decoder = f.FrameDecoder(self._read_exact)
        try:
            while not self._closed.is_set():
                self._dispatch(decoder.next())
        except (EOFError, OSError):
            log.debug("the SPDY client went away")
        except (f.FrameError, HeaderBlockError) as exc:
            log.info("SPDY protocol error from the client: %s", exc)
            with contextlib.suppress(ConnectionError):
                self.send(f.GoAway(self._last_id, f.GOAWAY_PROTOCOL_ERROR))
        finally:
            self._end()

    def _dispatch(self, frame: f.Frame) -> None:
        match frame:
            case f.SynStream():
                self._open(frame)
            case f.Data(stream_id, data, fin):
                stream = self._streams.get(stream_id)
                if stream is None or stream.remote_closed:
                    status = f.INVALID_STREAM if stream is None else f.STREAM_ALREADY_CLOSED
                    self.send(f.RstStream(stream_id, status))
                else:
                    stream._deliver(data, fin)
            case f.HeadersFrame(stream_id, _, fin) if fin and stream_id in self._streams:
                self._streams[stream_id]._deliver(b"", True)
            case f.RstStream(stream_id):
                if stream := self._streams.pop(stream_id, None):
                    stream._local_closed = True
                    stream._end_remote()
            case f.Ping(ping_id) if ping_id % 2 == 1:
                self.send(f.Ping(ping_id))  # a client's ping (odd) is echoed
            case f.GoAway():
                raise EOFError
            case _:
                pass  # SETTINGS, WINDOW_UPDATE, our own pings' echoes, unknown types

    def _open(self, frame: f.SynStream) -> None:
        if frame.stream_id % 2 == 0 or frame.stream_id <= self._last_id:
            raise f.FrameError(f"stream {frame.stream_id} opened out of order by the client")
        self._last_id = frame.stream_id
        stream = Stream(self, frame.stream_id, frame.headers)
        self._streams[frame.stream_id] = stream
        self.send(f.SynReply(frame.stream_id))
        if frame.fin:
            stream._end_remote()
        self._incoming.put(stream)

    def _read_exact(self, size: int) -> bytes:
        while len(self._pending) < size:
            chunk = self._conn.recv(max(65536, size - len(self._pending)))
            if not chunk:
                raise EOFError
            self._pending += chunk
        data = bytes(self._pending[:size])
        del self._pending[:size]
        return data

    def _end(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for stream in list(self._streams.values()):
            stream._end_remote()
        self._incoming.put(None)
