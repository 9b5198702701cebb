"""Per-user rate limits over fixed minute/hour/day windows on the simulated clock.

Windows are aligned to multiples of their length on the clock, so the minute window
resets at every whole simulated minute. A request refused with 429 does not use up
quota; every admitted request counts in all three windows.
"""

from __future__ import annotations

import math

WINDOWS = (("minute", 60), ("hour", 3600), ("day", 86400))


class RateWindows:
    def __init__(self, quota: tuple[int, int, int]) -> None:
        self.quotas = dict(zip((name for name, _ in WINDOWS), quota, strict=True))
        # window name -> (index of the current window, requests counted in it)
        self._used: dict[str, tuple[int, int]] = {}

    def _remaining(self, name: str, length: int, now: float) -> int:
        index, used = self._used.get(name, (-1, 0))
        current = math.floor(now / length)
        return self.quotas[name] - (used if index == current else 0)

    def admit(self, now: float) -> tuple[str, int] | None:
        """Count one request; or, if a window is spent, that window (the one that resets
        last when several are) and the seconds until it resets."""
        spent = [
            (_reset_in(length, now), name)
            for name, length in WINDOWS
            if self._remaining(name, length, now) <= 0
        ]
        if spent:
            seconds, name = max(spent)
            return name, seconds
        for name, length in WINDOWS:
            current = math.floor(now / length)
            index, used = self._used.get(name, (current, 0))
            self._used[name] = (current, used + 1 if index == current else 1)
        return None

    def headers(self, now: float) -> dict[str, str]:
        state = ", ".join(
            f'"{name}";r={max(0, self._remaining(name, length, now))};t={_reset_in(length, now)}'
            for name, length in WINDOWS
        )
        policy = ", ".join(f'"{name}";q={self.quotas[name]};w={length}' for name, length in WINDOWS)
        return {"RateLimit": state, "RateLimit-Policy": policy}


def _reset_in(length: int, now: float) -> int:
    """Whole seconds until the window resets, rounded up so waiting them is enough."""
    return max(1, math.ceil((math.floor(now / length) + 1) * length - now))
