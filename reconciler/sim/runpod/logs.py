"""A simulated pod's log as RunPod v2 streams it: `GET /v2/pods/{id}/logs`.

The contract: Server-Sent Events, one event per line, `id:` = `<ts>/<sequence>` and a
JSON `data:` of `{"ts", "source", "line"}`. Where the stream starts:
- `Last-Event-ID` (header) wins: the stream resumes just after that event;
- else `since` (RFC 3339): every line from that moment on;
- else the last `tail` lines (default 100, 0..5000; 0 = live lines only).
`source` (`container` or `system`) filters; without it both come. The stream then stays
open and carries new lines while the pod runs or is yet to run, and ends (cleanly,
with the last chunk) once the pod is EXITED, ERROR or gone.

A test can make a pod's backfills slow, one event at a time with a gap before each, as a
busy real server sends them: a reader must not take silence for the backfill's end.
A test can make a stream drop mid-way: the connection is cut without the closing
chunk, as a proxy or a network blip does, so a client must resume by its last id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.sim.runpod.pods import LogLine, SimPod
from reconciler.sim.runpod.validate import Problem

DEFAULT_TAIL = 100
MAX_TAIL = 5000
_SOURCES = (None, "container", "system")

Cursor = tuple[datetime, int]


@dataclass
class LogStream:
    """One open stream: where it stands, and whether a test wants it cut."""

    pod_id: str
    source: str | None
    cursor: Cursor | None
    backfill: list[LogLine]
    drop_after: int | None = None
    """Cut the connection after this many more events (None: never)."""
    backfill_gap: float = 0.0
    """Real seconds before each backfill event (a slow server); 0 sends it at once."""

    def take(self, lines: list[LogLine]) -> tuple[list[LogLine], bool]:
        """The lines to send now, and whether the stream must be cut after them."""
        if self.drop_after is None:
            return lines, False
        sent = lines[: self.drop_after]
        self.drop_after -= len(sent)
        return sent, self.drop_after == 0

    def advance(self, sent: list[LogLine]) -> None:
        if sent:
            self.cursor = sent[-1].key


def open_stream(
    pod: SimPod, now: datetime, params: Mapping[str, str], last_event_id: str | None
) -> LogStream:
    """The stream a request asks for, with its backfill; a Problem for bad parameters."""
    source = params.get("source")
    if source not in _SOURCES:
        raise Problem(422, "Request validation failed.", errors=["source: container|system"])
    tail = _tail(params.get("tail"))
    lines = pod.visible_log(now, source)
    if last_event_id:
        resume_after = parse_event_id(last_event_id)
        backfill = [line for line in lines if line.key > resume_after]
    elif params.get("since"):
        since = _parse_time(params["since"], "since")
        backfill = [line for line in lines if line.ts >= since]
    else:
        backfill = lines[-tail:] if tail else []
    # Live lines follow whatever exists now, even when the backfill skipped it.
    return LogStream(pod.id, source, lines[-1].key if lines else None, backfill)


def new_lines(pod: SimPod, now: datetime, stream: LogStream) -> list[LogLine]:
    lines = pod.visible_log(now, stream.source)
    if stream.cursor is None:
        return lines
    cursor = stream.cursor
    return [line for line in lines if line.key > cursor]


def parse_event_id(value: str) -> Cursor:
    """`<ts>/<sequence>` as this endpoint emits it; a bare timestamp resumes after it."""
    stamp, _, sequence = value.strip().partition("/")
    moment = _parse_time(stamp, "Last-Event-ID")
    if not sequence:
        return (moment, 2**62)
    if not sequence.isdigit():
        raise Problem(400, "Last-Event-ID is not an event id of this stream")
    return (moment, int(sequence))


def _tail(raw: str | None) -> int:
    try:
        tail = DEFAULT_TAIL if raw is None else int(raw)
    except ValueError:
        tail = -1
    if not 0 <= tail <= MAX_TAIL:
        raise Problem(422, "Request validation failed.", errors=[f"tail: 0..{MAX_TAIL}"])
    return tail


def _parse_time(value: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Problem(
            422, "Request validation failed.", errors=[f"{name}: an RFC 3339 timestamp"]
        ) from None
    if moment.tzinfo is None:
        raise Problem(422, "Request validation failed.", errors=[f"{name}: needs a UTC offset"])
    return moment.astimezone(UTC)
