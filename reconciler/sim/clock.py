"""A clock that only moves when told to, shared by the simulators and the code under test.

Tests and the demo drive time with `advance()` instead of sleeping, so provisioning
delays, rate-limit windows and grace periods pass in microseconds of real time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Timer:
    """A callback run every `period` seconds of simulated time (a controller's resync)."""

    period: timedelta
    callback: Callable[[], None]
    due: datetime


class SimClock:
    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self._now = start
        self._lock = threading.Lock()
        # One advance at a time, so timers fire in order and each exactly once.
        self._advancing = threading.RLock()
        self._timers: list[Timer] = []

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        """Seconds on this clock, for code that paces itself with a monotonic clock."""
        return self.now().timestamp()

    def advance(self, seconds: float) -> None:
        """Move on; timers due on the way run at their own moment (`now()` reads it)."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._advancing:
            with self._lock:
                target = self._now + timedelta(seconds=seconds)
            while (timer := self._next_due(target)) is not None:
                timer.callback()
            with self._lock:
                self._now = max(self._now, target)

    def every(self, seconds: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` each time `seconds` of simulated time have passed."""
        with self._lock:
            timer = Timer(
                timedelta(seconds=seconds), callback, self._now + timedelta(seconds=seconds)
            )
            self._timers.append(timer)
        return timer

    def cancel(self, timer: Timer) -> None:
        with self._lock:
            if timer in self._timers:
                self._timers.remove(timer)

    def _next_due(self, target: datetime) -> Timer | None:
        """The earliest timer due by `target`, with the clock moved to its moment."""
        with self._lock:
            due = [t for t in self._timers if t.due <= target]
            if not due:
                return None
            timer = min(due, key=lambda t: t.due)
            self._now = max(self._now, timer.due)
            timer.due += timer.period
            return timer

    def sleep(self, seconds: float) -> None:
        """A drop-in for time.sleep that moves simulated time instead of waiting."""
        self.advance(max(0.0, seconds))


def real_start() -> SimClock:
    """A clock set to the wall clock's time, for simulators run on their own: timestamps
    a person reads (and kubectl's ages) then make sense. Tests keep the fixed start."""
    return SimClock(datetime.now(UTC))
