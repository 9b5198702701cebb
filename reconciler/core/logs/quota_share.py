"""How many RunPod requests `kubectl logs` may spend: a bounded share of each quota window.

Log reads come from anyone with `pods/log`; the reconciler's own requests (list, create,
terminate) must never starve for them. So the kubelet endpoint's reads may spend at
most `share` of each window's quota (counted by the endpoint itself, over the window's
length), and never the window's last requests; a read beyond that is refused with a
sentence, or, for a follower's resume, waits. RunPod then never answers 429 for logs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.core.capacity.pacing import Window

ASSUMED_WINDOW = Window("minute", remaining=60, reset_in=60.0, quota=60, length=60.0)
"""Until RunPod's headers have named the quota: a minute of 60 requests."""
KEEP_FREE = 2
"""Requests of a window that log reads never take: the reconciler's next list and create."""


@dataclass(frozen=True)
class ShareRefusal:
    window: str
    allowed: int
    """Log reads the share allows in the window."""
    retry_in: float
    """Seconds until the oldest counted read leaves the window."""

    def message(self, share: float) -> str:
        return (
            f"too many log reads: they may spend {self.allowed} RunPod requests a "
            f"{self.window} ({share:.0%} of the quota, --log-read-share), and have; "
            f"try again in {math.ceil(self.retry_in)} s"
        )


def refusal(
    windows: Sequence[Window], share: float, reads: Sequence[float], now: float
) -> ShareRefusal | None:
    """Why one more log read, now, would pass the share; None when it may go.
    `reads` are the moments (seconds) of the endpoint's recent log requests."""
    known = [w for w in windows if w.quota and w.length]
    for window in known or [ASSUMED_WINDOW]:
        quota, length = window.quota or 0, window.length or 0.0
        allowed = math.floor(quota * share)
        counted = [t for t in reads if now - t < length]
        if window.remaining <= KEEP_FREE:
            return ShareRefusal(window.name, allowed, max(1.0, window.reset_in))
        if len(counted) >= allowed:
            # A share too small for the window (allowed 0) waits for its reset.
            frees_at = length - (now - min(counted)) if counted else window.reset_in
            return ShareRefusal(window.name, allowed, max(1.0, frees_at))
    return None
