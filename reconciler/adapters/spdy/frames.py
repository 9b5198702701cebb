"""SPDY/3.1 frames: what each carries, and their bytes on the wire.

Every frame starts with eight bytes. A control frame: the control bit and the version
(3), its type, then flags and a 24-bit length. A data frame: a 31-bit stream id, then
flags and a 24-bit length. The header blocks of SYN_STREAM, SYN_REPLY and HEADERS are
compressed by `headers`; the caller gives each direction one `FrameEncoder` and one
`FrameDecoder`, since compression runs across the frames of a direction.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.adapters.spdy.headers import Compressor, Decompressor, Headers

VERSION = 3
FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
# The largest length field; a data frame carries at most this many bytes.
MAX_LENGTH = (1 << 24) - 1

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS = 1, 2, 3, 4
PING, GOAWAY, HEADERS, WINDOW_UPDATE = 6, 7, 8, 9

# RST_STREAM status codes (draft §2.6.3) and GOAWAY status codes (§2.6.6).
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, UNSUPPORTED_VERSION, CANCEL = 1, 2, 3, 4, 5
INTERNAL_ERROR, FLOW_CONTROL_ERROR, STREAM_IN_USE, STREAM_ALREADY_CLOSED = 6, 7, 8, 9
GOAWAY_OK, GOAWAY_PROTOCOL_ERROR, GOAWAY_INTERNAL_ERROR = 0, 1, 2

_STREAM_ID = 0x7FFFFFFF


class FrameError(ValueError):
    """Bytes that are not a SPDY/3 frame: the session cannot go on."""


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: Headers
    associated_id: int = 0
    priority: int = 0
    fin: bool = False
    unidirectional: bool = False


@dataclass(frozen=True)
class SynReply:
    stream_id: int
    headers: Headers = field(default_factory=dict)
    fin: bool = False


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True)
class SettingsFrame:
    # (flags, id, value) per entry
    entries: tuple[tuple[int, int, int], ...] = ()
    clear: bool = False


@dataclass(frozen=True)
class Ping:
    ping_id: int


@dataclass(frozen=True)
class GoAway:
    last_good_stream_id: int
    status: int = GOAWAY_OK


@dataclass(frozen=True)
class HeadersFrame:
    stream_id: int
    headers: Headers
    fin: bool = False


@dataclass(frozen=True)
class WindowUpdate:
    stream_id: int
    delta: int


@dataclass(frozen=True)
class Data:
    stream_id: int
    data: bytes
    fin: bool = False


@dataclass(frozen=True)
class Unknown:
    """A control frame of a type this draft does not define; a receiver ignores it."""

    frame_type: int


Frame = (
    SynStream
    | SynReply
    | RstStream
    | SettingsFrame
    | Ping
    | GoAway
    | HeadersFrame
    | WindowUpdate
    | Data
    | Unknown
)


class FrameEncoder:
    def __init__(self) -> None:
        self._headers = Compressor()

    def encode(self, frame: Frame) -> bytes:
        match frame:
            case Data(stream_id, data, fin):
                if len(data) > MAX_LENGTH:
                    raise FrameError("a data frame carries at most 16 MiB - 1")
                head = struct.pack(">II", stream_id & _STREAM_ID, _flags_length(fin, len(data)))
                return head + data
            case SynStream(stream_id, headers, associated, priority, fin, unidirectional):
                flags = (FLAG_FIN if fin else 0) | (FLAG_UNIDIRECTIONAL if unidirectional else 0)
                body = struct.pack(">IIBB", stream_id, associated, (priority & 7) << 5, 0)
                return _control(SYN_STREAM, flags, body + self._headers.compress(headers))
            case SynReply(stream_id, headers, fin):
                body = struct.pack(">I", stream_id) + self._headers.compress(headers)
                return _control(SYN_REPLY, FLAG_FIN if fin else 0, body)
            case HeadersFrame(stream_id, headers, fin):
                body = struct.pack(">I", stream_id) + self._headers.compress(headers)
                return _control(HEADERS, FLAG_FIN if fin else 0, body)
            case RstStream(stream_id, status):
                return _control(RST_STREAM, 0, struct.pack(">II", stream_id, status))
            case SettingsFrame(entries, clear):
                body = struct.pack(">I", len(entries)) + b"".join(
                    struct.pack(">II", (flags << 24) | ident, value)
                    for flags, ident, value in entries
                )
                return _control(SETTINGS, 1 if clear else 0, body)
            case Ping(ping_id):
                return _control(PING, 0, struct.pack(">I", ping_id))
            case GoAway(last_good, status):
                return _control(GOAWAY, 0, struct.pack(">II", last_good, status))
            case WindowUpdate(stream_id, delta):
                return _control(WINDOW_UPDATE, 0, struct.pack(">II", stream_id, delta))
            case Unknown():
                raise FrameError("an unknown frame type is not sent")


def _flags_length(fin: bool, length: int) -> int:
    return ((FLAG_FIN if fin else 0) << 24) | length


def _control(frame_type: int, flags: int, body: bytes) -> bytes:
    if len(body) > MAX_LENGTH:
        raise FrameError("a control frame's payload is at most 16 MiB - 1")
    return struct.pack(">HHI", 0x8000 | VERSION, frame_type, (flags << 24) | len(body)) + body


class FrameDecoder:
    """Reads frames from `read_exact(n)`, which returns exactly n bytes or raises EOFError."""

    def __init__(
        self,
        read_exact: Callable[[int], bytes],
        data_piece: int = MAX_LENGTH,
        max_control: int = MAX_LENGTH,
    ) -> None:
        """A data frame longer than `data_piece` comes as several `Data` of at most that
        many bytes (the FIN on the last), so that a reader never holds a whole 16 MiB
        frame; a control frame longer than `max_control` is a `FrameError`."""
        self._read = read_exact
        self._headers = Decompressor()
        self._piece, self._max_control = data_piece, max_control
        self._data_left, self._data_stream, self._data_fin = 0, 0, False

    def next(self) -> Frame:
        if self._data_left:
            return self._data_piece()
        first, second = struct.unpack(">II", self._read(8))
        flags, length = second >> 24, second & MAX_LENGTH
        if not first & 0x80000000:
            stream_id = first & _STREAM_ID
            if stream_id == 0:
                raise FrameError("a data frame for stream 0")
            self._data_left, self._data_stream = length, stream_id
            self._data_fin = bool(flags & FLAG_FIN)
            return self._data_piece()
        if length > self._max_control:
            raise FrameError(f"a control frame of {length} bytes")
        payload = self._read(length) if length else b""
        version, frame_type = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise FrameError(f"SPDY version {version}; only 3 is spoken")
        try:
            return self._control(frame_type, flags, payload)
        except struct.error as exc:
            raise FrameError(f"control frame type {frame_type} is too short") from exc

    def _data_piece(self) -> Data:
        size = min(self._data_left, self._piece)
        self._data_left -= size
        data = self._read(size) if size else b""
        return Data(self._data_stream, data, self._data_fin and not self._data_left)

    def _control(self, frame_type: int, flags: int, payload: bytes) -> Frame:
        fin = bool(flags & FLAG_FIN)
        match frame_type:
            case 1:  # SYN_STREAM
                stream_id, associated, priority, _slot = struct.unpack_from(">IIBB", payload)
                headers = self._headers.decompress(payload[10:])
                unidirectional = bool(flags & FLAG_UNIDIRECTIONAL)
                return SynStream(
                    _nonzero(stream_id),
                    headers,
                    associated & _STREAM_ID,
                    priority >> 5,
                    fin,
                    unidirectional,
                )
            case 2:  # SYN_REPLY
                (stream_id,) = struct.unpack_from(">I", payload)
                return SynReply(_nonzero(stream_id), self._headers.decompress(payload[4:]), fin)
            case 8:  # HEADERS
                (stream_id,) = struct.unpack_from(">I", payload)
                headers = self._headers.decompress(payload[4:])
                return HeadersFrame(_nonzero(stream_id), headers, fin)
            case 3:  # RST_STREAM
                stream_id, status = _exactly(">II", payload)
                return RstStream(_nonzero(stream_id), status)
            case 4:  # SETTINGS
                (count,) = struct.unpack_from(">I", payload)
                if len(payload) != 4 + 8 * count:
                    raise FrameError("a SETTINGS frame's length does not match its count")
                entries = tuple(
                    (word >> 24, word & 0xFFFFFF, value)
                    for word, value in struct.iter_unpack(">II", payload[4:])
                )
                return SettingsFrame(entries, bool(flags & 1))
            case 6:  # PING
                (ping_id,) = _exactly(">I", payload)
                return Ping(ping_id)
            case 7:  # GOAWAY
                last_good, status = _exactly(">II", payload)
                return GoAway(last_good & _STREAM_ID, status)
            case 9:  # WINDOW_UPDATE
                stream_id, delta = _exactly(">II", payload)
                return WindowUpdate(stream_id & _STREAM_ID, delta & 0x7FFFFFFF)
        return Unknown(frame_type)


def _exactly(layout: str, payload: bytes) -> tuple[int, ...]:
    if len(payload) != struct.calcsize(layout):
        raise FrameError("a control frame of the wrong length")
    return struct.unpack(layout, payload)


def _nonzero(stream_id: int) -> int:
    stream_id &= _STREAM_ID
    if stream_id == 0:
        raise FrameError("stream 0 is not a stream")
    return stream_id
