"""Client-side pacing from RunPod's `RateLimit` / `RateLimit-Policy` headers.

Both headers are structured-field lists with one member per window (minute, hour,
day): `RateLimit` carries the remaining count `r` and the seconds `t` until the window
resets, `RateLimit-Policy` the quota `q` and window length `w`. Every authenticated
response carries them, so the latest answer tells us where we stand.

This module keeps that state on the client's clock and projects it to "now" (a window
whose reset has passed is whole again); the decisions themselves (how long to wait
before a request, how far apart ticks go, what share of the quota is ours when other
reconcilers use the same key) are pure functions in `reconciler.core.capacity.pacing`.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.core.capacity import pacing

# Answers of one window whose reset times differ by less than this are of one window
# instance (`t` is in whole seconds, rounded up).
SAME_WINDOW_SECONDS = 1.5
MAX_DROP_SAMPLES = 200


@dataclass(frozen=True)
class _Heard:
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
    """Remembers the latest RateLimit state; answers with `core.capacity.pacing`'s rules."""

    def __init__(self) -> None:
        self._heard: dict[str, _Heard] = {}
        self._quotas: dict[str, int] = {}
        self._lengths: dict[str, int] = {}
        self._drops: deque[pacing.DropSample] = deque(maxlen=MAX_DROP_SAMPLES)
        # When our recent requests other than tick lists were answered.
        self._worked: deque[float] = deque()
        self._last_list: float | None = None  # when our last tick list was answered
        self._first_heard: float | None = None
        self._lock = threading.Lock()

    def observe(self, headers: Mapping[str, str], now: float, tick_list: bool = False) -> None:
        """Take in one response's headers (call once per response to our request);
        `tick_list` says the request was a tick's list, which only looks."""
        state = headers.get("RateLimit")
        policy = headers.get("RateLimit-Policy")
        with self._lock:
            if tick_list:
                self._last_list = now
            else:
                self._worked.append(now)
            while self._worked and now - self._worked[0] > pacing.RATE_SPAN_SECONDS:
                self._worked.popleft()
            if policy:
                self._observe_policy(policy)
            if state:
                self._observe_state(state, now)

    def _observe_policy(self, header: str) -> None:
        for name, params in parse_members(header).items():
            if "q" in params:
                self._quotas[name] = params["q"]
            if params.get("w", 0) > 0:
                self._lengths[name] = params["w"]

    def _observe_state(self, header: str, now: float) -> None:
        if self._first_heard is None:
            self._first_heard = now
        sampled = False
        for name, params in parse_members(header).items():
            if "r" not in params or "t" not in params:
                continue
            heard = _Heard(params["r"], now, now + params["t"])
            before = self._heard.get(name)
            self._heard[name] = heard
            if not sampled and before is not None and _same_instance(before, heard):
                # Every window counts every request: one sample per answer is enough, from
                # the first window that did not reset in between (the day's, after a
                # long pause).
                self._drops.append(
                    pacing.DropSample(
                        now, before.remaining - heard.remaining, now - before.observed_at
                    )
                )
                sampled = True

    def windows(self, now: float) -> list[pacing.Window]:
        """Every window we heard of, projected to `now`."""
        with self._lock:
            return [
                w
                for name, heard in self._heard.items()
                if (w := self._project(name, heard, now)) is not None
            ]

    def _project(self, name: str, heard: _Heard, now: float) -> pacing.Window | None:
        quota = self._quotas.get(name)
        length = self._lengths.get(name)
        if heard.reset_at > now:
            return pacing.Window(
                name,
                max(0, heard.remaining),
                heard.reset_at - now,
                quota,
                length,
                now - heard.observed_at,
            )
        # The window has reset since we heard of it: whole again, if we know its quota.
        if quota is None:
            return None
        if not length:
            return pacing.Window(name, quota, 0.0, quota)
        periods = math.floor((now - heard.reset_at) / length) + 1
        reset_in = heard.reset_at + periods * length - now
        # What told us it is whole is its reset: that is how old the news is (the
        # spacing counts from it, so a tick waiting for it does not wait forever).
        return pacing.Window(name, quota, reset_in, quota, length, length - reset_in)

    def sharers(self, now: float) -> float:
        """Requests the account sends per request of ours lately (1: we are alone)."""
        with self._lock:
            samples = list(self._drops)
        return pacing.sharers(samples, now)

    def company(self, now: float) -> pacing.Company:
        """Whether another user spent our key lately, as far as the counters tell."""
        with self._lock:
            samples = list(self._drops)
            first = self._first_heard
        return pacing.company(samples, 0.0 if first is None else now - first, now)

    def delay(self, now: float) -> float:
        """Seconds to wait before the next request may be sent."""
        return pacing.next_request_delay(self.windows(now), self.sharers(now), self.company(now))

    def budget(self, now: float) -> int | None:
        """Requests we may still send now (our share), or None when no header told us."""
        return pacing.our_budget(self.windows(now), self.sharers(now))

    def tick_gap(self, now: float) -> float:
        """Seconds between the starts of two ticks that keep lists to their share."""
        with self._lock:
            samples, worked, last_list = list(self._drops), list(self._worked), self._last_list
        since_last_list = 0.0 if last_list is None else now - last_list
        gap = pacing.tick_gap(
            self.windows(now),
            pacing.sharers(samples, now),
            pacing.account_rate(samples, now),
            pacing.recent_rate(worked, now),
            since_last_list,
        )
        if last_list is None:
            return gap
        return pacing.gap_until_sendable(gap, since_last_list, self.delay(now))

    def ample(self, now: float, extra: int = 1) -> bool:
        """Whether `extra` requests more leave the quota ample (`pacing.ample`)."""
        with self._lock:
            samples = list(self._drops)
        return pacing.ample(
            self.windows(now),
            pacing.sharers(samples, now),
            pacing.account_rate(samples, now),
            extra,
        )


def _same_instance(before: _Heard, after: _Heard) -> bool:
    return abs(after.reset_at - before.reset_at) < SAME_WINDOW_SECONDS
