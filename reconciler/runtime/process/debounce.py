"""When a change seen by the watch should start an early tick (pure: time is passed in).

A burst of pod events (a Job creating a hundred pods, our own patches echoing back) becomes
one tick: it starts `delay` seconds after the first event of the burst, and never sooner
than the gap after the previous tick began, because every tick costs a RunPod list call.
The gap is asked for each time (`core.capacity.pacing.tick_gap`): a second while the quota
is ample, longer as it runs low, so the early tick is checked again when it is due. An
event that arrives while a tick runs gets a tick after it: that tick may have listed the
pods before the change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

DEFAULT_DELAY = 0.5
DEFAULT_MIN_GAP = 1.0


class Debouncer:
    def __init__(
        self,
        clock: Callable[[], float],
        delay: float = DEFAULT_DELAY,
        min_gap: Callable[[], float] | float = DEFAULT_MIN_GAP,
    ) -> None:
        self.clock, self.delay = clock, delay
        self.min_gap: Callable[[], float] = (
            min_gap if callable(min_gap) else (lambda: float(min_gap))
        )
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
            due = max(now + self.delay, self._earliest_start())
            self._due = due
            return due - now

    def hold(self) -> float:
        """Seconds the due early tick must still wait: the gap may have grown since it
        was scheduled (a tick spent quota meanwhile). 0 when it may start now."""
        with self._lock:
            return max(0.0, self._earliest_start() - self.clock())

    def fire(self) -> bool:
        """The early tick's time came: whether it must run, i.e. whether a change arrived
        that no tick has started after. Call it right before the tick would start."""
        with self._lock:
            self._due = None
            return self._last_change is not None and (
                self._last_start is None or self._last_change >= self._last_start
            )

    def started(self) -> None:
        """A tick (early or periodic) starts: it sees every change made before now."""
        with self._lock:
            self._last_start = self.clock()

    def since_last_start(self) -> float | None:
        with self._lock:
            return None if self._last_start is None else self.clock() - self._last_start

    def _earliest_start(self) -> float:
        return float("-inf") if self._last_start is None else self._last_start + self.min_gap()
