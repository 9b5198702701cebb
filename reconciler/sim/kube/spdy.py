"""The API server's side of a SPDY/3.1 connection to a kubelet: the client that
`pod_ws` drives when it translates kubectl's WebSocket exec into the SPDY the kubelet
speaks, as kube-apiserver's StreamTranslator does (it runs client-go's SPDY executor).

Written apart from the product's SPDY server (the simulator shares none of its code), so
each checks the other. What a client needs of SPDY/3 (draft 3.1): it opens streams with
SYN_STREAM (odd ids, a header block), sends DATA (FIN ends its half), answers the
server's PINGs, and reads DATA, SYN_REPLY, HEADERS, RST_STREAM and GOAWAY. Header blocks
are zlib with the draft's dictionary, one compression stream per direction. Like Go's
spdystream, no flow-control window is kept (WINDOW_UPDATE and SETTINGS are read past).
"""

from __future__ import annotations

import socket
import struct
import threading
import zlib
from collections.abc import Callable

from reconciler.sim.kube.tls_turns import Turns

# The draft's dictionary (section 2.6.10.1), byte for byte; zlib names it 0xe3c6a7c2.
DICTIONARY = (
    b"\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post\x00\x00\x00\x03put"
    b"\x00\x00\x00\x06delete\x00\x00\x00\x05trace\x00\x00\x00\x06accept\x00\x00\x00\x0eac"
    b"cept-charset\x00\x00\x00\x0faccept-encoding\x00\x00\x00\x0faccept-language\x00\x00"
    b"\x00\raccept-ranges\x00\x00\x00\x03age\x00\x00\x00\x05allow\x00\x00\x00\rauthorizat"
    b"ion\x00\x00\x00\rcache-control\x00\x00\x00\nconnection\x00\x00\x00\x0ccontent-base"
    b"\x00\x00\x00\x10content-encoding\x00\x00\x00\x10content-language\x00\x00\x00\x0econ"
    b"tent-length\x00\x00\x00\x10content-location\x00\x00\x00\x0bcontent-md5\x00\x00\x00"
    b"\rcontent-range\x00\x00\x00\x0ccontent-type\x00\x00\x00\x04date\x00\x00\x00\x04etag"
    b"\x00\x00\x00\x06expect\x00\x00\x00\x07expires\x00\x00\x00\x04from\x00\x00\x00\x04ho"
    b"st\x00\x00\x00\x08if-match\x00\x00\x00\x11if-modified-since\x00\x00\x00\rif-none-ma"
    b"tch\x00\x00\x00\x08if-range\x00\x00\x00\x13if-unmodified-since\x00\x00\x00\rlast-mo"
    b"dified\x00\x00\x00\x08location\x00\x00\x00\x0cmax-forwards\x00\x00\x00\x06pragma"
    b"\x00\x00\x00\x12proxy-authenticate\x00\x00\x00\x13proxy-authorization\x00\x00\x00"
    b"\x05range\x00\x00\x00\x07referer\x00\x00\x00\x0bretry-after\x00\x00\x00\x06server"
    b"\x00\x00\x00\x02te\x00\x00\x00\x07trailer\x00\x00\x00\x11transfer-encoding\x00\x00"
    b"\x00\x07upgrade\x00\x00\x00\nuser-agent\x00\x00\x00\x04vary\x00\x00\x00\x03via\x00"
    b"\x00\x00\x07warning\x00\x00\x00\x10www-authenticate\x00\x00\x00\x06method\x00\x00"
    b"\x00\x03get\x00\x00\x00\x06status\x00\x00\x00\x06200 OK\x00\x00\x00\x07version\x00"
    b"\x00\x00\x08HTTP/1.1\x00\x00\x00\x03url\x00\x00\x00\x06public\x00\x00\x00\nset-cook"
    b"ie\x00\x00\x00\nkeep-alive\x00\x00\x00\x06origin10010120120220520630030230330430530"
    b"6307402405406407408409410411412413414415416417502504505203 Non-Authoritative Inform"
    b"ation204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidde"
    b"n404 Not Found500 Internal Server Error501 Not Implemented503 Service UnavailableJa"
    b"n Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sa"
    b"t, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,applicat"
    b"ion/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchchar"
    b"set=utf-8charset=iso-8859-1,utf-,*,enq=0."
)

_SYN_STREAM, _SYN_REPLY, _RST_STREAM, _SETTINGS = 1, 2, 3, 4
_PING, _GOAWAY, _HEADERS, _WINDOW_UPDATE = 6, 7, 8, 9
_FIN = 0x01
_CANCEL = 5
# A kubelet's stream headers are a few bytes; anything near this is not a kubelet.
_MAX_HEADER_BLOCK = 64 * 1024

# (stream id, data, fin): called on the reader thread, in arrival order. A stream the
# server resets or a connection that ends reports fin with no data.
OnData = Callable[[int, bytes, bool], None]


class SpdyError(ValueError):
    """Bytes from the kubelet that are not SPDY/3."""


def header_block(headers: dict[str, str]) -> bytes:
    """A name/value block before compression: a count, then length-prefixed pairs."""
    out = struct.pack(">I", len(headers))
    for name, value in headers.items():
        for text in (name.lower().encode(), value.encode()):
            out += struct.pack(">I", len(text)) + text
    return out


def read_header_block(block: bytes) -> dict[str, str]:
    try:
        (count,), at = struct.unpack_from(">I", block), 4
        pairs = []
        for _ in range(count * 2):
            (length,) = struct.unpack_from(">I", block, at)
            pairs.append(block[at + 4 : at + 4 + length].decode())
            at += 4 + length
    except (struct.error, UnicodeDecodeError) as exc:
        raise SpdyError(f"a header block that does not decode: {exc}") from exc
    if at != len(block):
        raise SpdyError("a header block with bytes after its last pair")
    return dict(zip(pairs[::2], pairs[1::2], strict=True))


class SpdyClient:
    """One upgraded connection: open streams, send on them, and get what arrives through
    `on_data` from a reader thread started by `start`."""

    def __init__(self, sock: socket.socket, already_read: bytes, on_data: OnData) -> None:
        self._sock = sock
        # Read by our reader thread, written by the streams' writers: over TLS they take
        # turns (`tls_turns`).
        self._conn = Turns(sock)
        self._buffer = bytearray(already_read)
        self._on_data = on_data
        self._write = threading.Lock()
        self._deflate = zlib.compressobj(zdict=DICTIONARY)
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._next_id = 1
        self._open: set[int] = set()
        self._replied = threading.Condition()
        self.replies: dict[int, dict[str, str]] = {}
        self.ended = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name="kube-sim-spdy", daemon=True)

    def start(self) -> None:
        self._reader.start()

    def open_stream(self, headers: dict[str, str]) -> int:
        with self._write:
            stream_id, self._next_id = self._next_id, self._next_id + 2
            self._open.add(stream_id)
            block = self._deflate.compress(header_block(headers))
            block += self._deflate.flush(zlib.Z_SYNC_FLUSH)
            body = struct.pack(">IIBB", stream_id, 0, 0, 0) + block
            self._conn.sendall(_control(_SYN_STREAM, 0, body))
        return stream_id

    def send(self, stream_id: int, data: bytes, fin: bool = False) -> None:
        flags_length = ((_FIN if fin else 0) << 24) | len(data)
        with self._write:
            self._conn.sendall(struct.pack(">II", stream_id, flags_length) + data)

    def wait_replies(self, stream_ids: list[int], timeout: float) -> bool:
        """Whether the kubelet answered each stream with SYN_REPLY in time (client-go's
        connection waits for it before using a stream)."""
        with self._replied:
            return self._replied.wait_for(
                lambda: self.ended.is_set() or all(i in self.replies for i in stream_ids),
                timeout,
            ) and all(i in self.replies for i in stream_ids)

    def close(self) -> None:
        self._conn.end()
        self._reader.join(timeout=10)
        self._sock.close()

    def _read_loop(self) -> None:
        try:
            while True:
                self._frame(*self._next_frame())
        except (EOFError, OSError, SpdyError, zlib.error):
            pass
        finally:
            for stream_id in sorted(self._open):
                self._on_data(stream_id, b"", True)
            self._open.clear()
            with self._replied:
                self.ended.set()
                self._replied.notify_all()

    def _next_frame(self) -> tuple[int, int, bytes]:
        first, second = struct.unpack(">II", self._exactly(8))
        return first, second, self._exactly(second & 0xFFFFFF)

    def _frame(self, first: int, second: int, payload: bytes) -> None:
        flags = second >> 24
        if not first & 0x80000000:
            self._data(first, payload, bool(flags & _FIN))
            return
        if (first >> 16) & 0x7FFF != 3:
            raise SpdyError("not SPDY version 3")
        kind = first & 0xFFFF
        if kind in (_SYN_REPLY, _HEADERS):
            (stream_id,) = struct.unpack_from(">I", payload)
            headers = self._headers(payload[4:])
            if kind == _SYN_REPLY:
                with self._replied:
                    self.replies[stream_id & 0x7FFFFFFF] = headers
                    self._replied.notify_all()
            if flags & _FIN:
                self._data(stream_id & 0x7FFFFFFF, b"", True)
        elif kind == _SYN_STREAM:  # a kubelet opens no stream; refuse it as spdystream does
            (stream_id,) = struct.unpack_from(">I", payload)
            self._headers(payload[10:])
            with self._write:
                body = struct.pack(">II", stream_id & 0x7FFFFFFF, _CANCEL)
                self._conn.sendall(_control(_RST_STREAM, 0, body))
        elif kind == _RST_STREAM:
            self._data(struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF, b"", True)
        elif kind == _PING:
            with self._write:
                self._conn.sendall(_control(_PING, 0, payload))
        elif kind == _GOAWAY:
            raise EOFError

    def _data(self, stream_id: int, data: bytes, fin: bool) -> None:
        if stream_id not in self._open:
            return
        if fin:
            self._open.discard(stream_id)
        self._on_data(stream_id, data, fin)

    def _headers(self, compressed: bytes) -> dict[str, str]:
        block = self._inflate.decompress(compressed, _MAX_HEADER_BLOCK)
        if self._inflate.unconsumed_tail:
            raise SpdyError("a header block too large for a kubelet")
        return read_header_block(block)

    def _exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            chunk = self._conn.recv(64 * 1024)
            if not chunk:
                raise EOFError
            self._buffer += chunk
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data


def _control(kind: int, flags: int, body: bytes) -> bytes:
    return struct.pack(">HHI", 0x8003, kind, (flags << 24) | len(body)) + body
