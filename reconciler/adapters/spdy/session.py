"""The server side of a SPDY/3.1 session: the client opens streams, we answer them.

One reader thread decodes the client's frames and files each stream's data; any thread
may write. Every stream the client opens is answered (SYN_REPLY) at once, as Kubernetes'
own server does, and queued for `accept()`; the caller decides what a stream is for
from its headers and resets those it does not want.

Flow control: SPDY/3.1 windows are neither enforced nor sent, like the Go library every
Kubernetes client and API server uses (which ignores WINDOW_UPDATE); instead, as Go's
spdystream hands a stream's data over unbuffered, the reader thread waits while a stream
holds `STREAM_BUFFER` unread bytes or the whole session `SESSION_BUFFER`, so a client
sending faster than the far end takes is held back by TCP, and what one session holds
is bounded (one frame, at most 16 MiB, on top).

Limits, so that one client cannot grow the process: at most `max_streams` streams open
at once (a SYN_STREAM beyond is answered RST_STREAM REFUSED_STREAM and kept nowhere); a
stream leaves the table once both halves ended or either side reset it; once the caller
took the streams it needs (`stop_accepting`), later ones are refused too. With an
`idle_timeout`, a session in which no frame went either way for that long ends (the
kubelet's --streaming-connection-idle-timeout, which spdystream applies the same way).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from reconciler.adapters.spdy import frames as f
from reconciler.adapters.spdy.duplex import Duplex
from reconciler.adapters.spdy.headers import HeaderBlockError, Headers

log = logging.getLogger(__name__)

STREAM_BUFFER = 1 << 20
SESSION_BUFFER = 4 << 20
MAX_STREAMS = 64
# Data frames we send stay small enough to interleave the streams of a session, and
# those we read are taken in such pieces: a 16 MiB frame is never held whole.
_CHUNK = 32 * 1024
# No control frame of a Kubernetes stream comes near this (headers are a few names).
_MAX_CONTROL = 64 * 1024


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
        self._session._taken(len(chunk))
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
            self._session._forget_if_done(self)

    def reset(self, status: int = f.CANCEL) -> None:
        self._local_closed = True
        self._session.send(f.RstStream(self.id, status))
        self._end_remote()
        self._session._forget(self)

    def _deliver(self, data: bytes, fin: bool) -> None:
        """Files what the client sent; waits (the reader thread) while this stream holds
        `STREAM_BUFFER` unread bytes."""
        with self._ready:
            if data:
                self._session._wait(
                    self._ready,
                    lambda: (
                        self._buffered < self._session.limits.stream_buffer or self._remote_closed
                    ),
                )
                if not self._remote_closed:  # reset or ended while waiting: dropped
                    self._chunks.append(data)
                    self._buffered += len(data)
                    self._session._held(len(data))
            self._remote_closed = self._remote_closed or fin
            self._ready.notify_all()

    def _end_remote(self) -> None:
        """The client's half ended. Ours closed too (a reset), what it sent and nobody
        read is let go; else it stays to be read."""
        with self._ready:
            self._remote_closed = True
            dropped = self._buffered if self._local_closed else 0
            if dropped:
                self._chunks.clear()
                self._buffered = 0
            self._ready.notify_all()
        if dropped:
            self._session._taken(dropped)

    @property
    def remote_closed(self) -> bool:
        return self._remote_closed


@dataclass(frozen=True)
class SessionLimits:
    max_streams: int = MAX_STREAMS
    """Streams open at once; a SYN_STREAM beyond is refused (RST_STREAM REFUSED_STREAM)."""
    stream_buffer: int = STREAM_BUFFER
    """Unread bytes one stream holds before the reader waits."""
    session_buffer: int = SESSION_BUFFER
    """Unread bytes all streams hold before the reader waits."""
    idle_timeout: float | None = None
    """Seconds without a frame either way after which the session ends; None: never."""


class Session:
    """Runs from `start()` until the client goes away, is idle too long, or `close()`."""

    def __init__(
        self,
        sock: socket.socket,
        recv: Callable[[int], bytes] | None = None,
        limits: SessionLimits = SessionLimits(),
    ) -> None:
        """`recv` reads what the client sent (default: the socket's own); an HTTP server
        passes its buffered reader, which may already hold the first frames."""
        self._sock = sock
        self.limits = limits
        # Our reader thread and the streams' writers share one TLS connection.
        self._conn = Duplex(sock, recv)
        self._pending = bytearray()
        self._encoder = f.FrameEncoder()
        self._write_lock = threading.Lock()
        self._streams: dict[int, Stream] = {}
        self._table_lock = threading.Lock()
        self._last_id = 0
        self._incoming: queue.Queue[Stream | None] = queue.Queue()
        self._accepting = True
        self._refused_data = 0
        self._closed = threading.Event()
        self._buffered = 0
        self._room = threading.Condition()
        self._active_at = time.monotonic()
        self._on_end: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._run, name="spdy-session", daemon=True)

    def start(self) -> Session:
        self._thread.start()
        return self

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    @property
    def buffered(self) -> int:
        """Bytes the client sent that nobody read yet."""
        return self._buffered

    def on_end(self, callback: Callable[[], None]) -> None:
        """Have `callback` called once the session ends (at once if it has), from the
        thread that ends it: a client gone, idle too long, or `close()`."""
        with self._room:
            if not self._closed.is_set():
                self._on_end.append(callback)
                return
        callback()

    def stop_accepting(self) -> None:
        """The caller has the streams it needs: those queued and any later are refused."""
        with self._table_lock:
            self._accepting = False
        while True:
            try:
                stream = self._incoming.get_nowait()
            except queue.Empty:
                return
            if stream is None:
                self._incoming.put(None)
                return
            with contextlib.suppress(ConnectionError):
                stream.reset(f.REFUSED_STREAM)

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
            self._active_at = time.monotonic()

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
        decoder = f.FrameDecoder(self._read_exact, _CHUNK, _MAX_CONTROL)
        try:
            while not self._closed.is_set():
                self._dispatch(decoder.next())
        except _Idle:
            log.info(
                "a streaming session sent and received nothing for %.0f s: closed",
                self.limits.idle_timeout,
            )
            self.close()
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
                    # once per stream, not per piece of a long frame
                    if stream_id != self._refused_data:
                        status = f.INVALID_STREAM if stream is None else f.STREAM_ALREADY_CLOSED
                        self.send(f.RstStream(stream_id, status))
                    self._refused_data = stream_id
                else:
                    self._wait_for_room()
                    stream._deliver(data, fin)
                    self._forget_if_done(stream)
            case f.HeadersFrame(stream_id, _, fin) if fin and stream_id in self._streams:
                stream = self._streams[stream_id]
                stream._deliver(b"", True)
                self._forget_if_done(stream)
            case f.RstStream(stream_id):
                if stream := self._streams.get(stream_id):
                    stream._local_closed = True
                    stream._end_remote()
                    self._forget(stream)
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
        if not self._accepting or len(self._streams) >= self.limits.max_streams:
            self.send(f.RstStream(frame.stream_id, f.REFUSED_STREAM))
            return
        stream = Stream(self, frame.stream_id, frame.headers)
        with self._table_lock:
            self._streams[frame.stream_id] = stream
        self.send(f.SynReply(frame.stream_id))  # before anything else of the stream
        if frame.fin:
            stream._end_remote()
        with self._table_lock:
            queued = self._accepting
            if queued:
                self._incoming.put(stream)
        if not queued:  # the caller stopped accepting meanwhile
            stream.reset(f.REFUSED_STREAM)

    def _forget(self, stream: Stream) -> None:
        with self._table_lock:
            if self._streams.get(stream.id) is stream:
                del self._streams[stream.id]

    def _forget_if_done(self, stream: Stream) -> None:
        """Both halves ended: nothing more can come for the stream."""
        if stream._local_closed and stream.remote_closed:
            self._forget(stream)

    def _held(self, size: int) -> None:
        with self._room:
            self._buffered += size

    def _taken(self, size: int) -> None:
        with self._room:
            self._buffered -= size
            self._room.notify_all()

    def _wait_for_room(self) -> None:
        """The reader waits while the session holds `session_buffer` unread bytes."""
        with self._room:
            self._wait(
                self._room,
                lambda: self._buffered < self.limits.session_buffer or self._closed.is_set(),
            )

    def _wait(self, condition: threading.Condition, ready: Callable[[], bool]) -> None:
        """Waits on `condition` (held) until `ready`, within the idle limit: a reader held
        back by unread data is as idle as one waiting for bytes."""
        while not condition.wait_for(ready, self._quiet_left()):
            pass

    def _read_exact(self, size: int) -> bytes:
        while len(self._pending) < size:
            chunk = self._conn.recv(max(65536, size - len(self._pending)), self._quiet_left())
            if chunk is None:
                continue  # nothing yet: the idle limit is asked again
            if not chunk:
                raise EOFError
            self._pending += chunk
            self._active_at = time.monotonic()
        data = bytes(self._pending[:size])
        del self._pending[:size]
        return data

    def _quiet_left(self) -> float | None:
        """How much longer the session may stay quiet; `_Idle` once it may not."""
        if self.limits.idle_timeout is None:
            return None
        left = self.limits.idle_timeout - (time.monotonic() - self._active_at)
        if left <= 0:
            raise _Idle
        return left

    def _end(self) -> None:
        with self._room:
            if self._closed.is_set():
                return
            self._closed.set()
            callbacks, self._on_end = self._on_end, []
            self._room.notify_all()
        for stream in list(self._streams.values()):
            stream._end_remote()
        self._incoming.put(None)
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one broken hook must not keep the others from running
                log.exception("a streaming session's end hook failed")


class _Idle(Exception):
    """No frame went either way for the idle timeout."""
