"""The kubelet endpoint's log reads: within their share of RunPod's quota, and one RunPod
stream per followed instance however many follow it.

What they cost in RunPod requests: a plain read, one (none while the instance is
followed: its lines come from the shared stream's history); all the followers of one
instance together, one backfill of the last MAX_TAIL lines and one live stream, plus
one per resume after a break or a silence of `follow_idle`. Every request counts
against `--log-read-share` (`reconciler.core.logs.quota_share`): a new reader beyond it is
refused with a sentence, a shared stream's resume waits for room.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from datetime import datetime

from reconciler.adapters.runpod.logstream import (
    MAX_TAIL,
    LogEvent,
    LogRead,
    LogStreamBroken,
    LogStreamOpener,
)
from reconciler.core.capacity.pacing import Window
from reconciler.core.logs.quota_share import ShareRefusal, refusal

log = logging.getLogger(__name__)

KEPT_EVENTS = 2 * MAX_TAIL
"""Events a shared stream keeps for readers that join later (the oldest are dropped)."""
DAY_SECONDS = 86400.0
"""The longest quota window: reads older than this count in none."""
POLL_SECONDS = 1.0
"""How often a waiting follower asks whether its reader is still there."""

Reader = Callable[[str, LogRead, Callable[[], bool]], Generator[LogEvent, None, bool]]
"""Reads one instance's log (`read_log` bound to a client): id, what, should_stop."""


class LogsRefused(Exception):
    """A new log read beyond the share; the message says when to try again."""


class LogGate:
    """Counts the endpoint's log requests and keeps them within their share."""

    def __init__(
        self,
        share: float,
        windows: Callable[[], list[Window]],
        clock: Callable[[], datetime],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.share, self.windows, self.clock, self.sleep = share, windows, clock, sleep
        self._reads: deque[float] = deque()
        self._lock = threading.Lock()

    def _try(self) -> ShareRefusal | None:
        """Counts one request and returns None, or why there is no room for it yet."""
        now = self.clock().timestamp()
        with self._lock:
            while self._reads and now - self._reads[0] > DAY_SECONDS:
                self._reads.popleft()
            refused = refusal(self.windows(), self.share, list(self._reads), now)
            if refused is None:
                self._reads.append(now)
            return refused

    def take(self) -> None:
        """Room for a new reader's request, or LogsRefused."""
        refused = self._try()
        if refused is not None:
            raise LogsRefused(refused.message(self.share))

    def wait(self, should_stop: Callable[[], bool]) -> bool:
        """Waits for room (a running stream's resume); False once `should_stop()`."""
        while (refused := self._try()) is not None:
            if should_stop():
                return False
            log.info("log reads at their share of RunPod's quota; a resume waits")
            self.sleep(min(refused.retry_in, POLL_SECONDS))
        return True

    def opener(
        self, open_stream: LogStreamOpener, queue: bool, should_stop: Callable[[], bool]
    ) -> LogStreamOpener:
        """`open_stream` behind the gate: refused beyond the share, or queued (`queue`)."""

        def gated(instance_id: str, **kwargs: object) -> Iterator[LogEvent]:
            if not queue:
                self.take()
            elif not self.wait(should_stop):
                raise LogStreamBroken("the followers left while waiting for quota")
            return open_stream(instance_id, **kwargs)  # type: ignore[arg-type]

        return gated


class _Shared:
    """One instance's shared stream: what it read so far, and who reads it."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.history: list[LogEvent] = []
        self.dropped = 0
        """Events dropped from the front of `history` (KEPT_EVENTS)."""
        self.readers = 0
        self.started = threading.Event()
        self.live = False
        self.failure: Exception | None = None

    def add(self, event: LogEvent) -> None:
        with self.changed:
            self.history.append(event)
            if len(self.history) > KEPT_EVENTS:
                cut = len(self.history) - KEPT_EVENTS
                del self.history[:cut]
                self.dropped += cut
            self.changed.notify_all()

    def end(self, failure: Exception | None = None) -> None:
        with self.changed:
            self.live, self.failure = False, self.failure or failure
            self.changed.notify_all()
        self.started.set()


class SharedFollows:
    """One RunPod stream per followed instance; followers join it and read its history."""

    def __init__(self, backfill: Reader, follow: Reader, clock: Callable[[], datetime]) -> None:
        """`backfill` reads a new stream's history (a new reader's request), `follow` its
        live part (resumes wait for quota)."""
        self._backfill, self._follow, self.clock = backfill, follow, clock
        self._streams: dict[str, _Shared] = {}
        self._lock = threading.Lock()

    def history(self, instance_id: str) -> list[LogEvent] | None:
        """Everything a live shared stream of the instance has read; None when there is none."""
        with self._lock:
            shared = self._streams.get(instance_id)
        if shared is None or not shared.started.is_set():
            return None
        with shared.changed:
            return list(shared.history) if shared.live else None

    def follow(
        self, instance_id: str, should_stop: Callable[[], bool]
    ) -> tuple[list[LogEvent], Iterator[LogEvent]]:
        """The instance's history so far, and its live events until it stops or the
        reader goes. Raises what the first backfill raised (LogsRefused, RunPodError)."""
        with self._lock:
            shared = self._streams.get(instance_id)
            first = shared is None
            if shared is None:
                shared = self._streams[instance_id] = _Shared()
            shared.readers += 1
        try:
            if first:
                self._start(instance_id, shared)
            shared.started.wait()
            with shared.changed:
                if shared.failure is not None and not shared.history:
                    raise shared.failure
                history = list(shared.history)
                position = shared.dropped + len(history)
        except BaseException:
            self._leave(instance_id, shared)
            raise
        return history, self._live(instance_id, shared, position, should_stop)

    def _start(self, instance_id: str, shared: _Shared) -> None:
        opened_at = self.clock()
        try:
            events = self._backfill(instance_id, LogRead(tail=MAX_TAIL), lambda: False)
            for event in events_until_end(events, shared):
                shared.add(event)
        except Exception as exc:
            self._forget(instance_id, shared)
            shared.end(exc)
            raise
        if not shared.live:  # the stream ended: the instance stopped
            self._forget(instance_id, shared)
            shared.end()
            return
        last = shared.history[-1].id if shared.history else None
        read = LogRead(after=last, since=None if last else opened_at, tail=0, follow=True)
        threading.Thread(
            target=self._run, args=(instance_id, shared, read), name="log-follow", daemon=True
        ).start()
        shared.started.set()

    def _run(self, instance_id: str, shared: _Shared, read: LogRead) -> None:
        failure: Exception | None = None
        try:
            for event in self._follow(instance_id, read, lambda: shared.readers == 0):
                shared.add(event)
        except Exception as exc:  # a follower sees its stream end; the log says why
            log.warning("following the log of %s stopped: %s", instance_id, exc)
            failure = exc
        self._forget(instance_id, shared)
        shared.end(failure)

    def _live(
        self, instance_id: str, shared: _Shared, position: int, should_stop: Callable[[], bool]
    ) -> Iterator[LogEvent]:
        try:
            while True:
                with shared.changed:
                    while shared.live and position >= shared.dropped + len(shared.history):
                        if should_stop():
                            return
                        shared.changed.wait(POLL_SECONDS)
                    start = max(position, shared.dropped) - shared.dropped
                    new = shared.history[start:]
                    position = shared.dropped + len(shared.history)
                    ended = not shared.live
                yield from new
                if ended:
                    return
        finally:
            self._leave(instance_id, shared)

    def _leave(self, instance_id: str, shared: _Shared) -> None:
        with self._lock:
            shared.readers -= 1

    def _forget(self, instance_id: str, shared: _Shared) -> None:
        with self._lock:
            if self._streams.get(instance_id) is shared:
                del self._streams[instance_id]


def events_until_end(
    events: Generator[LogEvent, None, bool], shared: _Shared
) -> Iterator[LogEvent]:
    """The backfill's events; marks `shared` live unless the stream ended with them."""
    while True:
        try:
            yield next(events)
        except StopIteration as stop:
            shared.live = not stop.value
            return
