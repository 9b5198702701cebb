"""RunPod's own time: the `Date` of its answers (RFC 9110 §6.6.1: when the server made
the answer, by its clock), carried on between answers by this process's monotonic clock.

Graces are measured on it (docs/architecture.md §4, "Clocks"): a step of this host's
wall clock (an NTP correction, a VM resumed, an operator's `date -s`) moves neither it
nor the monotonic clock, so no grace ends early and none lasts forever; and another
process, on another host or after a restart, reads the same time from RunPod, so a time
one process recorded (a create's attempt) is measured by the next on the same clock as
RunPod's own timestamps (`createdAt`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

SAME_SECONDS = 2.0
"""A Date behind the time carried on by at most this is the same time: Date has whole
seconds, so it lags the moment it names by up to one. A later Date is taken as the
better bound; one further behind means a clock moved, and RunPod's is taken again."""


class ServedClock:
    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._anchor: tuple[datetime, float] | None = None
        self._lock = threading.Lock()

    def heard(self, served: datetime | None) -> None:
        """An answer dated `served` (None: not dated) came in just now."""
        if served is None:
            return
        mono = self._monotonic()
        with self._lock:
            if self._anchor is not None:
                carried = self._at(self._anchor, mono)
                # A Date behind what is carried on by less than a second or two is the
                # same moment, cut to whole seconds; one ahead of it is a better bound.
                if served <= carried and (carried - served).total_seconds() <= SAME_SECONDS:
                    return
            self._anchor = (served, mono)

    def now(self) -> datetime | None:
        """RunPod's time now, or None before its first dated answer."""
        with self._lock:
            anchor = self._anchor
        return None if anchor is None else self._at(anchor, self._monotonic())

    @staticmethod
    def _at(anchor: tuple[datetime, float], mono: float) -> datetime:
        served, then = anchor
        return served + timedelta(seconds=mono - then)
