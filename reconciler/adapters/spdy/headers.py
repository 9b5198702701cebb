"""SPDY/3 name/value header blocks and their compression.

Each direction of a connection compresses all its header blocks with one zlib stream
that starts from the dictionary the SPDY/3 draft gives (§2.6.10.1) and ends each block
with a sync flush, so a block depends on every block before it in that direction. The
dictionary is rebuilt here from the draft's two parts: the length-prefixed words, then
the literal tail of status lines, dates and content types.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping

# The words as the draft lists them, kept as prose to read against it.
_WORDS = (
    *(  # noqa: SIM905
        "options head post put delete trace accept accept-charset accept-encoding "
        "accept-language accept-ranges age allow authorization cache-control connection "
        "content-base content-encoding content-language content-length content-location "
        "content-md5 content-range content-type date etag expect expires from host if-match "
        "if-modified-since if-none-match if-range if-unmodified-since last-modified location "
        "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after "
        "server te trailer transfer-encoding upgrade user-agent vary via warning "
        "www-authenticate method get status"
    ).split(),
    "200 OK",
    "version",
    "HTTP/1.1",
    *"url public set-cookie keep-alive origin".split(),  # noqa: SIM905
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417"
    "502504505203 Non-Authoritative Information204 No Content301 Moved Permanently"
    "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error"
    "501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct "
    "Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,"
    "image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8"
    "charset=iso-8859-1,utf-,*,enq=0."
)


def _dictionary() -> bytes:
    words = b"".join(struct.pack(">I", len(word)) + word.encode() for word in _WORDS)
    return words + _TAIL.encode()


DICTIONARY = _dictionary()

# Multiple values of one name travel as one value joined by NUL.
_SEPARATOR = b"\x00"


# A few stream headers are all a Kubernetes client sends; a block inflating past this
# is an attack on memory, not a request.
MAX_BLOCK = 256 * 1024


class HeaderBlockError(ValueError):
    """A header block that does not decode: a protocol error for the whole session."""


Headers = dict[str, list[str]]


def encode_block(headers: Mapping[str, Iterable[str]]) -> bytes:
    """The uncompressed block: a count, then each name and its joined values."""
    pairs = [
        (name.lower().encode(), _SEPARATOR.join(v.encode() for v in values))
        for name, values in headers.items()
    ]
    out = [struct.pack(">I", len(pairs))]
    for name, value in pairs:
        out.append(struct.pack(">I", len(name)) + name + struct.pack(">I", len(value)) + value)
    return b"".join(out)


def decode_block(block: bytes) -> Headers:
    try:
        (count,), offset = struct.unpack_from(">I", block), 4
        headers: Headers = {}
        for _ in range(count):
            name, offset = _string(block, offset)
            value, offset = _string(block, offset)
            if name in headers:
                raise HeaderBlockError(f"header {name!r} appears twice")
            headers[name] = value.split("\x00")
    except struct.error as exc:
        raise HeaderBlockError("the header block ends inside a name or value") from exc
    if offset != len(block):
        raise HeaderBlockError("bytes after the header block's last value")
    return headers


def _string(block: bytes, offset: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">I", block, offset)
    start, end = offset + 4, offset + 4 + length
    if end > len(block):
        raise HeaderBlockError("a header name or value runs past the block")
    try:
        return block[start:end].decode(), end
    except UnicodeDecodeError as exc:
        raise HeaderBlockError("a header name or value is not UTF-8") from exc


class Compressor:
    """One direction's header compression: blocks must be compressed in sending order."""

    def __init__(self) -> None:
        self._zlib = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zlib.DEFLATED, 15, zdict=DICTIONARY)

    def compress(self, headers: Mapping[str, Iterable[str]]) -> bytes:
        return self._zlib.compress(encode_block(headers)) + self._zlib.flush(zlib.Z_SYNC_FLUSH)


class Decompressor:
    """One direction's header decompression: blocks must be given in arrival order."""

    def __init__(self) -> None:
        self._zlib = zlib.decompressobj(zdict=DICTIONARY)

    def decompress(self, data: bytes) -> Headers:
        try:
            block = self._zlib.decompress(data, MAX_BLOCK)
        except zlib.error as exc:
            raise HeaderBlockError(f"the header block does not inflate: {exc}") from exc
        if self._zlib.unconsumed_tail:
            raise HeaderBlockError(f"a header block inflates past {MAX_BLOCK} bytes")
        return decode_block(block)
