"""A clock that only moves when told to, shared by the simulators and the code under test.

Tests and the demo drive time with `advance()` instead of sleeping, so provisioning
delays, rate-limit windows and grace periods pass in microseconds of real time.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)



class SimClock:
    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        """Seconds on this clock, for code that paces itself with a monotonic clock."""
        return self.now().timestamp()

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += timedelta(seconds=seconds)

    def sleep(self, seconds: float) -> None:
        """A drop-in for time.sleep that moves simulated time instead of waiting."""
        self.advance(max(0.0, seconds))


def real_start() -> SimClock:
    """A clock set to the wall clock's time, for simulators run on their own: timestamps
    a person reads (and kubectl's ages) then make sense. Tests keep the fixed start."""
    return SimClock(datetime.now(UTC))
