"""The pure side of pod logs: the kubelet's query options (sinceSeconds vs sinceTime,
tailLines -1 = all, bad values refused), the user's lines of a backfill (the batch
wrapper's marker and notes left out, since, tail) and how they are rendered
(timestamps, limitBytes)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.contract import EXIT_CODE_MARKER, exit_code_marker
from reconciler.core.logs.kubectl_logs import (
    LogLine,
    LogOptions,
    LogOptionsError,
    backfill_lines,
    last_lines,
    parse_options,
    render,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


NONCE = "0123456789abcdef0123"


def lines(*texts: str) -> list[LogLine]:
    return [LogLine(NOW + timedelta(seconds=n), text) for n, text in enumerate(texts)]


def test_options_as_the_kubelet_reads_them() -> None:
    options = parse_options(
        {
            "follow": "true",
            "tailLines": "2",
            "sinceSeconds": "60",
            "timestamps": "true",
            "limitBytes": "10",
        },
        NOW,
    )
    assert options == LogOptions(True, 2, NOW - timedelta(minutes=1), True, 10, False)
    assert parse_options({"tailLines": "-1"}, NOW).tail_lines is None
    assert parse_options({"sinceTime": "2026-01-01T11:00:00Z"}, NOW).since == NOW - timedelta(
        hours=1
    )


@pytest.mark.parametrize(
    "query",
    [
        {"sinceSeconds": "0"},
        {"limitBytes": "0"},
        {"tailLines": "-2"},
        {"tailLines": "x"},
        {"follow": "maybe"},
        {"sinceTime": "noon"},
        {"sinceTime": "2026-01-01T11:00:00"},
        {"sinceSeconds": "5", "sinceTime": "2026-01-01T11:00:00Z"},
    ],
)
def test_bad_options_are_refused(query: dict[str, str]) -> None:
    with pytest.raises(LogOptionsError):
        parse_options(query, NOW)


def test_the_wrappers_lines_are_left_out_before_the_tail_is_taken() -> None:
    backfill = lines(
        "runpod-reconciler: note",
        "a",
        "b",
        "c",
        f"{exit_code_marker(NONCE)}0",
        '{"id": "pod123", "status": "EXITED"}',
        "curl: (22) error: 409",
    )
    assert [x.line for x in last_lines(backfill, LogOptions(tail_lines=2), NONCE)] == ["b", "c"]
    assert last_lines(backfill, LogOptions(tail_lines=0), NONCE) == []
    since = LogOptions(since=NOW + timedelta(seconds=2))
    assert [x.line for x in last_lines(backfill, since, NONCE)] == ["b", "c"]


def test_a_backfill_is_read_only_as_far_as_its_reader_takes_it() -> None:
    taken = 0

    def endless() -> Iterator[LogLine]:
        nonlocal taken
        while True:
            taken += 1
            yield LogLine(NOW, "x" * 1000)

    shown = render(
        backfill_lines(endless(), LogOptions(limit_bytes=100), NONCE), LogOptions(limit_bytes=100)
    )
    assert b"".join(shown) == b"x" * 100
    assert taken == 1


def test_a_tail_holds_its_lines_cut_to_what_limit_bytes_shows() -> None:
    backfill = lines("a" * 500, "b" * 500, "c" * 500)
    options = LogOptions(tail_lines=2, limit_bytes=10)
    held = list(backfill_lines(backfill, options, NONCE))
    assert [x.line for x in held] == ["b" * 10, "c" * 10]
    assert b"".join(render(held, options)) == b"b" * 10


def test_a_line_that_looks_like_the_marker_without_the_nonce_is_the_users() -> None:
    forged = f"{EXIT_CODE_MARKER}0"
    backfill = lines("a", forged, "b", f"{exit_code_marker('other-nonce')}1", "c")
    shown = [x.line for x in last_lines(backfill, LogOptions(), NONCE)]
    assert shown == ["a", forged, "b", f"{exit_code_marker('other-nonce')}1", "c"]


def test_timestamps_and_limit_bytes() -> None:
    stamped = b"".join(render(lines("hello"), LogOptions(timestamps=True)))
    assert stamped == b"2026-01-01T12:00:00.000000Z hello\n"
    assert b"".join(render(lines("abc", "def"), LogOptions(limit_bytes=6))) == b"abc\nde"


@given(
    st.lists(st.text(alphabet="ab\u00e9", max_size=5), max_size=8),
    st.integers(min_value=1, max_value=40),
)
def test_limit_bytes_is_never_exceeded(texts: list[str], limit: int) -> None:
    out = b"".join(render(lines(*texts), LogOptions(limit_bytes=limit)))
    full = b"".join(render(lines(*texts), LogOptions()))
    assert out == full[:limit]
