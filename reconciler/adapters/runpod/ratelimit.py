"""Client-side pacing from RunPod's `RateLimit` / `RateLimit-Policy` headers.

Both headers are structured-field lists with one member per window (minute, hour,
day): `RateLimit` carries the remaining count `r` and the seconds `t` until the window
resets, `RateLimit-Policy` the quota `q` and window length `w`. Every authenticated
response carries them, so the latest answer tells us where we stand.

Pacing rules, applied before every request:
- a window with nothing left: wait until it resets;
- a window in its last quarter: spread what is left evenly over the time until it
  resets, so that a burst of creates slows down smoothly instead of hitting 429
  (which would cost a round trip and a `Retry-After` wait);
- otherwise: go at once, so a normal tick of a few calls is never slowed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

# Below this share of a window's quota we start spreading the remaining requests.
PACE_BELOW_SHARE = 0.25


@dataclass(frozen=True)
class Window:
    """What the latest response said about one window, on the client's clock."""

    remaining: int
    observed_at: float
    reset_at: float


def parse_members(header: str) -> dict[str, dict[str, int]]:
    """`"minute";r=5;t=30, "hour";…` → {"minute": {"r": 5, "t": 30}, …}; junk is skipped."""
    members: dict[str, dict[str, int]] = {}
    for member in header.split(","):
        name, *params = member.split(";")
        name = name.strip().strip('"')
        if name:
            members[name] = _int_params(params)
    return members


def _int_params(params: list[str]) -> dict[str, int]:
    values: dict[str, int] = {}
    for param in params:
        key, _, value = param.partition("=")
        try:
            values[key.strip()] = int(value.strip())
        except ValueError:
            continue
    return values


class RateLimiter:
    """Remembers the latest RateLimit state and says how long to wait before a request."""

    def __init__(self) -> None:
        self._windows: dict[str, Window] = {}
        self._quotas: dict[str, int] = {}
        self._lock = threading.Lock()

    def observe(self, headers: Mapping[str, str], now: float) -> None:
        state = headers.get("RateLimit")
        policy = headers.get("RateLimit-Policy")
        with self._lock:
            if policy:
                self._observe_policy(policy)
            if state:
                self._observe_state(state, now)

    def _observe_policy(self, header: str) -> None:
        for name, params in parse_members(header).items():
            if "q" in params:
                self._quotas[name] = params["q"]

    def _observe_state(self, header: str, now: float) -> None:
        for name, params in parse_members(header).items():
            if "r" in params and "t" in params:
                self._windows[name] = Window(params["r"], now, now + params["t"])

    def delay(self, now: float) -> float:
        """Seconds to wait before the next request may be sent."""
        with self._lock:
            waits = [self._wait(name, window, now) for name, window in self._windows.items()]
        return max(waits, default=0.0)

    def _wait(self, name: str, window: Window, now: float) -> float:
        if window.reset_at <= now:
            return 0.0
        if window.remaining <= 0:
            return window.reset_at - now
        quota = self._quotas.get(name)
        if quota is None or window.remaining > quota * PACE_BELOW_SHARE:
            return 0.0
        spacing = (window.reset_at - window.observed_at) / window.remaining
        return max(0.0, window.observed_at + spacing - now)

    def budget(self, now: float) -> int | None:
        """Requests we may still send now, or None when no header has told us yet."""
        with self._lock:
            counts = [self._left(name, window, now) for name, window in self._windows.items()]
        known = [count for count in counts if count is not None]
        return min(known, default=None)

    def _left(self, name: str, window: Window, now: float) -> int | None:
        if window.reset_at > now:
            return max(0, window.remaining)
        # The window has reset since we heard of it: its full quota, if we know it.
        return self._quotas.get(name)
