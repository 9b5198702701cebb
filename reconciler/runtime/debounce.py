"""When a change seen by the watch should start an early tick (pure: time is passed in).

A burst of pod events (a Job creating a hundred pods, our own patches echoing back) becomes
one tick: it starts `delay` seconds after the first event of the burst, and never sooner
than `min_gap` seconds after the previous tick began, because every tick costs a RunPod
list call out of a rate limit of about 60 a minute. An event that arrives while a tick
runs gets a tick after it: that tick may have listed the pods before the change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

DEFAULT_DELAY = 0.5
DEFAULT_MIN_GAP = 1.0


class Debouncer:
    def __init__(self, clock: Callable[[], float], delay: float = DEFAULT_DELAY,
                 min_gap: float = DEFAULT_MIN_GAP) -> None:
        self.clock, self.delay, self.min_gap = clock, delay, min_gap
        self._due: float | None = None
        self._last_change: float | None = None
        self._last_start: float | None = None
        self._lock = threading.Lock()  # the watch threads poke, a scheduler thread fires

    def poke(self) -> float | None:
        """Something changed. Seconds from now at which to fire, or None when an early
        tick is already due (this change joins it)."""
        with self._lock:
            now = self.clock()
            self._last_change = now
            if self._due is not None:
                return None
            due = now + self.delay
            if self._last_start is not None:
                due = max(due, self._last_start + self.min_gap)
            self._due = due
            return due - now

    def fire(self) -> bool:
        """The early tick's time came: whether it must run, i.e. whether a change arrived
        that no tick has started after. Call it right before the tick would start."""
        with self._lock:
            self._due = None
            return self._last_change is not None and (
                self._last_start is None or self._last_change >= self._last_start)

    def started(self) -> None:
        """A tick (early or periodic) starts: it sees every change made before now."""
        with self._lock:
            self._last_start = self.clock()
