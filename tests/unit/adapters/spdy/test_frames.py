"""SPDY/3.1 framing, from the protocol's own examples: the header dictionary of the
SPDY/3 draft (its zlib dictionary id), the frame layouts of the draft's figures byte by
byte, the opening frames real kubectl 1.32 sent (captured on this machine), header
compression that runs across the frames of a direction, and frames a server refuses."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.spdy import frames as f
from reconciler.adapters.spdy.headers import (
    DICTIONARY,
    MAX_BLOCK,
    Compressor,
    Decompressor,
    HeaderBlockError,
    decode_block,
    encode_block,
)

# What `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false kubectl exec p -- sh -c ...` (1.32.4) sent
# after the 101: SYN_STREAMs for the error, stdout and stderr streams, then, once it had
# the exit status, RST_STREAM(CANCEL) for each and GOAWAY(OK).
KUBECTL_EXEC = bytes.fromhex(
    "80030001000000290000000100000000000078f9e3c6a7c26260606004a7b392a2d4c45c6851c29a0a0a"
    "6800000000ffff800300010000001900000003000000000000c22ac5565c92925f5a02000000ffff8003"
    "00010000001500000005000000000000c229975a5404000000ffff800300030000000800000001000000"
    "05800300030000000800000003000000058003000300000008000000050000000580030007000000080000"
    "000000000000"
)


def decode_all(data: bytes) -> list[f.Frame]:
    stream = io.BytesIO(data)

    def read_exact(size: int) -> bytes:
        chunk = stream.read(size)
        if len(chunk) < size:
            raise EOFError
        return chunk

    decoder, out = f.FrameDecoder(read_exact), []
    while stream.tell() < len(data):
        out.append(decoder.next())
    return out


def test_the_dictionary_is_the_drafts_by_its_zlib_id():
    # A zlib stream names its preset dictionary by Adler-32; SPDY/3's is e3c6a7c2, and
    # kubectl's first header block carries that id right after the zlib header.
    assert len(DICTIONARY) == 1423
    assert zlib.adler32(DICTIONARY) == 0xE3C6A7C2
    assert KUBECTL_EXEC[20:24] == bytes.fromhex("e3c6a7c2")


def test_kubectls_exec_frames_decode():
    assert decode_all(KUBECTL_EXEC) == [
        f.SynStream(1, {"streamtype": ["error"]}),
        f.SynStream(3, {"streamtype": ["stdout"]}),
        f.SynStream(5, {"streamtype": ["stderr"]}),
        f.RstStream(1, f.CANCEL),
        f.RstStream(3, f.CANCEL),
        f.RstStream(5, f.CANCEL),
        f.GoAway(0, f.GOAWAY_OK),
    ]


@pytest.mark.parametrize(
    ("frame", "wire"),
    [
        # control bit + version 3, type, flags + 24-bit length, then the fields
        (f.Ping(1), "8003 0006 00000004 00000001"),
        (f.RstStream(3, f.CANCEL), "8003 0003 00000008 00000003 00000005"),
        (f.GoAway(7, f.GOAWAY_PROTOCOL_ERROR), "8003 0007 00000008 00000007 00000001"),
        (f.WindowUpdate(5, 65536), "8003 0009 00000008 00000005 00010000"),
        (f.SettingsFrame(((0, 7, 65536),)), "8003 0004 0000000c 00000001 00000007 00010000"),
        # a data frame: stream id with the control bit clear, FIN in the flags byte
        (f.Data(5, b"hi"), "00000005 00000002 6869"),
        (f.Data(5, b"", fin=True), "00000005 01000000"),
    ],
)
def test_frame_layouts_match_the_draft(frame: f.Frame, wire: str):
    data = bytes.fromhex(wire.replace(" ", ""))
    assert f.FrameEncoder().encode(frame) == data
    assert decode_all(data) == [frame]


def test_syn_reply_carries_flags_and_a_compressed_block():
    data = f.FrameEncoder().encode(f.SynReply(3, {}, fin=True))
    assert data[:5] == bytes.fromhex("8003000201")  # SYN_REPLY, FLAG_FIN
    assert struct.unpack(">I", data[4:8])[0] & 0xFFFFFF == len(data) - 8
    assert decode_all(data) == [f.SynReply(3, {}, fin=True)]


def test_uncompressed_block_layout_and_multiple_values():
    block = encode_block({"Port": ["8888"], "x": ["a", "b"]})
    assert block == (
        b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x04port"
        + b"\x00\x00\x00\x048888"
        + b"\x00\x00\x00\x01x"
        + b"\x00\x00\x00\x03a\x00b"
    )
    assert decode_block(block) == {"port": ["8888"], "x": ["a", "b"]}


def test_compression_runs_across_the_frames_of_a_direction():
    compressor = Compressor()
    first = compressor.compress({"streamtype": ["stdout"], "port": ["8888"]})
    second = compressor.compress({"streamtype": ["stdout"], "port": ["8888"]})
    assert len(second) < len(first)  # the second refers back into the first
    ours = Decompressor()
    assert ours.decompress(first) == ours.decompress(second)
    with pytest.raises(HeaderBlockError):
        Decompressor().decompress(second)  # out of context it means nothing


values = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
headers = st.dictionaries(
    st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12),
    st.lists(values, min_size=1, max_size=3),
    max_size=5,
)
stream_ids = st.integers(1, 2**31 - 1)
frames = st.one_of(
    st.builds(
        f.SynStream,
        stream_ids,
        headers,
        st.integers(0, 2**31 - 1),
        st.integers(0, 7),
        st.booleans(),
        st.booleans(),
    ),
    st.builds(f.SynReply, stream_ids, headers, st.booleans()),
    st.builds(f.HeadersFrame, stream_ids, headers, st.booleans()),
    st.builds(f.RstStream, stream_ids, st.integers(1, 11)),
    st.builds(f.Ping, st.integers(0, 2**32 - 1)),
    st.builds(f.GoAway, st.integers(0, 2**31 - 1), st.integers(0, 2)),
    st.builds(f.WindowUpdate, st.integers(0, 2**31 - 1), st.integers(1, 2**31 - 1)),
    st.builds(f.Data, stream_ids, st.binary(max_size=300), st.booleans()),
)


@given(st.lists(frames, max_size=8))
def test_any_run_of_frames_decodes_to_itself(run: list[f.Frame]):
    encoder = f.FrameEncoder()
    assert decode_all(b"".join(encoder.encode(frame) for frame in run)) == run


@pytest.mark.parametrize(
    ("wire", "says"),
    [
        ("8002 0006 00000004 00000001", "version 2"),  # SPDY/2
        ("00000000 00000001 00", "stream 0"),  # data for stream 0
        ("8003 0006 00000005 0000000100", "wrong length"),  # PING of 5 bytes
        ("8003 0003 00000008 00000000 00000001", "stream 0"),  # RST of stream 0
        ("8003 0004 00000008 00000002 00000000", "count"),  # SETTINGS count 2, one entry
    ],
)
def test_malformed_frames_are_refused(wire: str, says: str):
    with pytest.raises(f.FrameError, match=says):
        decode_all(bytes.fromhex(wire.replace(" ", "")))


def test_an_unknown_control_frame_is_passed_over():
    assert decode_all(bytes.fromhex("8003 00ff 00000002 abcd".replace(" ", ""))) == [
        f.Unknown(0xFF)
    ]


def test_bad_header_blocks_are_refused():
    with pytest.raises(HeaderBlockError, match="inflate"):
        Decompressor().decompress(b"not zlib at all")
    twice = b"\x00\x00\x00\x02" + (b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x01b") * 2
    with pytest.raises(HeaderBlockError, match="twice"):
        decode_block(twice)
    with pytest.raises(HeaderBlockError, match="past the block"):
        decode_block(b"\x00\x00\x00\x01\x00\x00\x00\x09ab")
    bomb = zlib.compressobj(9, zlib.DEFLATED, 15, zdict=DICTIONARY)
    data = bomb.compress(b"\x00" * (MAX_BLOCK + 1)) + bomb.flush(zlib.Z_SYNC_FLUSH)
    with pytest.raises(HeaderBlockError, match="inflates past"):
        Decompressor().decompress(data)


def test_a_long_data_frame_is_read_in_pieces_and_its_fin_comes_last():
    encoded = f.FrameEncoder().encode(f.Data(3, b"a" * 10 + b"b" * 5, fin=True))
    decoder = f.FrameDecoder(io.BytesIO(encoded + encoded[:8]).read, data_piece=4)
    pieces = [decoder.next() for _ in range(4)]
    assert [p.data for p in pieces] == [b"aaaa", b"aaaa", b"aabb", b"bbb"]
    assert [p.fin for p in pieces] == [False, False, False, True]
    assert {p.stream_id for p in pieces} == {3}


def test_a_control_frame_past_the_limit_is_refused_unread():
    encoded = f.FrameEncoder().encode(f.SynStream(1, {"streamtype": ["x" * 100]}))
    with pytest.raises(f.FrameError, match="control frame"):
        f.FrameDecoder(io.BytesIO(encoded).read, max_control=32).next()
