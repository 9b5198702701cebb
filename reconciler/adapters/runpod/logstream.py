"""Reading a pod's log from RunPod v2: `GET /v2/pods/{id}/logs`, Server-Sent Events.

Each event carries `id: <ts>/<sequence>` and `data: {"ts", "source", "line"}`. The stream
starts with a backfill (the last `tail` lines, or every line `since` a moment, or every
line after a `Last-Event-ID`), then stays open with live lines while the pod runs, and
ends when the pod has stopped. It may also break (a proxy, the network): then
`LogStreamBroken` is raised and a reader resumes by the last event id it saw, so that
no line is lost and none comes twice (`read_log`).

The stream does not mark the end of its backfill. But the contract makes an event's id
its timestamp, and the answer's `Date` header says when RunPod served the request, by
the same clock: an event stamped after that moment was printed after the request
began, so it is live and the backfill before it is complete. (Date has whole seconds:
an event counts as live from one second after it, so no backfill line is ever taken
for live; RunPod's clock is used, never ours, so no clock skew can cut a backfill.)

The same reader serves `kubectl logs` and the exit code of a finished batch pod: the
integer after the wrapper's last marker line (`exit_code_from`).

What each read costs in RunPod requests: one per stream opened, so one for a plain read
and one more per resume after a break.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from reconciler.core.contract import exit_code_marker
from reconciler.core.domain import ExitLog

log = logging.getLogger(__name__)

MAX_TAIL = 5000
"""RunPod backfills at most this many lines."""
_LEADING_INT = re.compile(r"-?[0-9]{1,10}")
LIVE_AFTER_DATE = timedelta(seconds=1)
"""An event stamped this long after the stream's Date (whole seconds) is live."""


@dataclass(frozen=True)
class LogEvent:
    id: str
    ts: datetime
    source: str
    line: str


class LogStreamBroken(Exception):
    """The stream stopped without its end: resume from the last event id."""


class LogStreamIdle(Exception):
    """Nothing arrived for the idle time given when the stream was opened."""


class LogStreamOpener(Protocol):
    def __call__(
        self,
        instance_id: str,
        *,
        source: str | None,
        tail: int | None,
        since: datetime | None,
        last_event_id: str | None,
        idle_seconds: float,
        on_open: Callable[[datetime | None], None] | None = None,
    ) -> Iterator[LogEvent]:
        """The stream's events; `on_open` is told the answer's Date (None: not given)
        before the first event."""
        ...


def sse_events(raw_lines: Iterable[str]) -> Iterator[LogEvent]:
    """The events of an SSE stream; events without a JSON payload are skipped."""
    event_id, data = "", []
    for raw in raw_lines:
        if raw.startswith("id:"):
            event_id = raw[3:].strip()
        elif raw.startswith("data:"):
            data.append(raw[5:].removeprefix(" "))
        elif raw == "" and data:
            event = _event(event_id, "\n".join(data))
            event_id, data = "", []
            if event is not None:
                yield event
    if data and (event := _event(event_id, "\n".join(data))) is not None:
        yield event


def _event(event_id: str, payload: str) -> LogEvent | None:
    try:
        body = json.loads(payload)
        ts = datetime.fromisoformat(str(body["ts"]).replace("Z", "+00:00")).astimezone(UTC)
        return LogEvent(
            event_id or str(body["ts"]), ts, str(body.get("source", "")), str(body.get("line", ""))
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        log.debug("skipping a log event that is not {ts, source, line}")
        return None


@dataclass(frozen=True)
class LogRead:
    """What to read: where to start, and whether to follow the live stream."""

    source: str | None = "container"
    tail: int | None = None
    """Lines to backfill (capped at MAX_TAIL); None with no `since` means as many as
    RunPod keeps."""
    since: datetime | None = None
    after: str | None = None
    """Start just after this event id (then `tail` and `since` do not apply)."""
    follow: bool = False


def read_log(
    open_stream: LogStreamOpener,
    instance_id: str,
    read: LogRead,
    *,
    backfill_idle_seconds: float,
    follow_idle_seconds: float,
    max_resumes: int = 5,
    sleep: Callable[[float], None],
    should_stop: Callable[[], bool] = lambda: False,
) -> Generator[LogEvent, None, bool]:
    """The events of a pod's log, resuming after breaks by the last event id.

    Without `follow` it ends at the end of the backfill: when the stream ends, when the
    `tail` asked for came, or at the first live event (stamped after the first stream's
    Date, see above; it is not yielded). Only an instance that prints nothing more
    leaves none of these signs: then `backfill_idle_seconds` of silence ends it. With
    `follow` it goes on until the stream ends (the pod stopped), or `should_stop()`
    says the reader has gone (asked after each idle spell). After `max_resumes` breaks
    in a row without a new event it gives up with the last break. Returns True when the
    stream ended (the pod stopped), False when it was left open.
    """
    cursor: str | None = read.after
    breaks = 0
    backfill = _Backfill(None if read.since or read.after else _tail(read))
    if not read.follow and backfill.complete():
        return False
    while True:
        idle = follow_idle_seconds if read.follow else backfill_idle_seconds
        try:
            for event in open_stream(
                instance_id,
                source=read.source,
                tail=None if read.since else _tail(read),
                since=read.since,
                last_event_id=cursor,
                idle_seconds=idle,
                on_open=backfill.served,
            ):
                if not read.follow and backfill.is_live(event):
                    return False
                cursor, breaks = event.id, 0
                yield event
                if not read.follow and backfill.took_one():
                    return False
            return True
        except LogStreamIdle:
            if not read.follow or should_stop():
                return False
            log.debug("log stream of %s idle for %.0f s; resuming", instance_id, idle)
        except LogStreamBroken as exc:
            breaks += 1
            if breaks > max_resumes or should_stop():
                raise
            delay = min(2.0 ** (breaks - 1), 10.0)
            log.info(
                "log stream of %s broke (%s); resuming after %s in %.0f s",
                instance_id,
                exc,
                cursor or "the start",
                delay,
            )
            sleep(delay)


def exit_log(events: Iterable[LogEvent], nonce: str) -> ExitLog:
    """What a stopped instance's last events say of its process: the container's lines,
    and the code our batch wrapper printed among them with the pod's `nonce` (RunPod's
    system lines left out)."""
    lines = tuple(event.line for event in events if event.source != "system")
    return ExitLog(exit_code_from(lines, nonce), lines)


def exit_code_from(lines: Iterable[str], nonce: str) -> int | None:
    """The integer after the last marker line with `nonce` (a later run's wins), or None
    when no line carries one."""
    marker = exit_code_marker(nonce)
    code: int | None = None
    for line in lines:
        if marker in line:
            match = _LEADING_INT.match(line.rsplit(marker, 1)[1].strip())
            code = int(match.group()) if match else None
    return code


def _tail(read: LogRead) -> int:
    return min(read.tail if read.tail is not None else MAX_TAIL, MAX_TAIL)


class _Backfill:
    """Where a read's backfill ends: after `tail` events (when a tail chose it), or
    before the first event stamped after the first stream's Date."""

    def __init__(self, tail: int | None) -> None:
        self.left = tail
        self.live_from: datetime | None = None

    def served(self, date: datetime | None) -> None:
        # The first stream's: a resumed stream's Date is later, and so are its lines.
        if self.live_from is None and date is not None:
            self.live_from = date + LIVE_AFTER_DATE

    def is_live(self, event: LogEvent) -> bool:
        return self.live_from is not None and event.ts >= self.live_from

    def took_one(self) -> bool:
        if self.left is not None:
            self.left -= 1
        return self.complete()

    def complete(self) -> bool:
        return self.left is not None and self.left <= 0
