"""A pod's log as `kubectl logs` asks for it: the kubelet's options, and the lines we show.

The kubelet's `/containerLogs` takes `follow`, `tailLines`, `sinceSeconds`, `sinceTime`,
`timestamps`, `limitBytes` and `previous` (as `PodLogOptions` defines them); the same
options serve `reconciler logs`. What a user sees is the container's own output: the
batch wrapper's marker line and its own messages are left out.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from reconciler.core.contract import exit_code_marker
from reconciler.core.printable import quoted

WRAPPER_PREFIX = "runpod-reconciler:"
"""How the batch wrapper's own messages begin."""

PREVIOUS_UNSUPPORTED = (
    "previous logs are not available for pods on RunPod: an instance keeps one log, "
    "and a container restarted by RunPod continues it (drop --previous)"
)


INT64_MAX = 2**63 - 1
"""The kubelet's options are int64s."""
MOST_SINCE_SECONDS = 100 * 365 * 86400
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
"""No log line is older: a `since` before it means the whole log."""
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
_INTEGER = re.compile(r"-?[0-9]{1,19}")


class LogOptionsError(ValueError):
    """An option a kubelet would refuse; the message names it."""


@dataclass(frozen=True)
class LogOptions:
    follow: bool = False
    tail_lines: int | None = None
    """The last this many lines; None = all."""
    since: datetime | None = None
    timestamps: bool = False
    limit_bytes: int | None = None
    previous: bool = False


@dataclass(frozen=True)
class LogLine:
    ts: datetime
    line: str


def parse_options(query: Mapping[str, str], now: datetime) -> LogOptions:
    """The kubelet's query parameters; `now` turns sinceSeconds into a moment."""
    since_seconds = _int(query, "sinceSeconds", least=1, most=MOST_SINCE_SECONDS)
    since_time = query.get("sinceTime")
    if since_seconds is not None and since_time:
        raise LogOptionsError("at most one of sinceTime or sinceSeconds may be specified")
    since = None
    if since_seconds is not None:
        since = max(EARLIEST, now - timedelta(seconds=since_seconds))
    if since_time:
        since = parse_time(since_time, "sinceTime")
    tail = _int(query, "tailLines", least=-1)
    return LogOptions(
        follow=_bool(query, "follow"),
        tail_lines=None if tail is None or tail < 0 else tail,
        since=since,
        timestamps=_bool(query, "timestamps"),
        limit_bytes=_int(query, "limitBytes", least=1),
        previous=_bool(query, "previous"),
    )


def parse_time(value: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise LogOptionsError(f"{name} must be an RFC 3339 time, not {quoted(value)}") from None
    if moment.tzinfo is None:
        raise LogOptionsError(f"{name} must carry a time zone, as RFC 3339 does")
    out_of_range = LogOptionsError(
        f"{name} must be a time from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}, not {quoted(value)}"
    )
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # a zone's offset pushed it past year 1 or 9999
        raise out_of_range from None
    if not EARLIEST <= moment <= LATEST:
        raise out_of_range
    return moment


def users_lines(lines: Iterable[LogLine], nonce: str) -> Iterator[LogLine]:
    """The lines the user's process printed: not the batch wrapper's notes, its exit-code
    marker (with the pod's `nonce`), nor what follows the marker (the wrapper's stop
    call, its answer or its errors, is all that prints until the instance stops)."""
    marker = exit_code_marker(nonce)
    finished = False
    for line in lines:
        if line.line.startswith(marker):
            finished = True
        elif not finished and not line.line.startswith(WRAPPER_PREFIX):
            yield line


def last_lines(lines: Iterable[LogLine], options: LogOptions, nonce: str) -> list[LogLine]:
    """The user's lines of a backfill, from `since`, the last `tail_lines` of them."""
    return list(backfill_lines(lines, options, nonce))


def backfill_lines(lines: Iterable[LogLine], options: LogOptions, nonce: str) -> Iterator[LogLine]:
    """`last_lines` as they are read: without a tail nothing is held, so a reader that
    stops (at `limit_bytes`) stops the read; with one, only the last `tail_lines` are,
    each cut to what `limit_bytes` can show of it."""
    kept = (
        line
        for line in users_lines(lines, nonce)
        if options.since is None or line.ts >= options.since
    )
    if options.tail_lines is None:
        return kept
    if options.limit_bytes is not None:
        # A character is one byte or more: the cut line still fills the budget.
        kept = (LogLine(line.ts, line.line[: options.limit_bytes]) for line in kept)
    return iter(deque(kept, maxlen=options.tail_lines))


def render(lines: Iterable[LogLine], options: LogOptions) -> Iterator[bytes]:
    """The bytes of each line as the kubelet sends them, cut at `limit_bytes`."""
    budget = options.limit_bytes
    for line in lines:
        data = format_line(line, options.timestamps)
        if budget is not None:
            data = data[:budget]
            budget -= len(data)
        if data:
            yield data
        if budget is not None and budget <= 0:
            return


def format_line(line: LogLine, timestamps: bool) -> bytes:
    text = line.line + "\n"
    if timestamps:
        stamp = line.ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        text = f"{stamp} {text}"
    return text.encode("utf-8", "replace")


def _bool(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name, "").lower()
    if value in ("", "false", "0"):
        return False
    if value in ("true", "1"):
        return True
    raise LogOptionsError(f"{name} must be true or false, not {quoted(value)}")


def _int(query: Mapping[str, str], name: str, least: int, most: int = INT64_MAX) -> int | None:
    """ASCII digits only: Python's int() also takes "+5", " 5 ", "0_1" and other
    scripts' digits, none of which a kubelet would."""
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    if not _INTEGER.fullmatch(raw) or not least <= int(raw) <= most:
        raise LogOptionsError(
            f"{name} must be a whole number from {least} to {most}, not {quoted(raw)}"
        )
    return int(raw)
