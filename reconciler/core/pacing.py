"""How fast to spend RunPod's quota: pure decisions from what the RateLimit headers said.

RunPod counts every request of a user in three windows at once (minute, hour and day
in the contract's examples); a request needs room in all of them. The reconciler spends
requests on two kinds of work: a tick's list call, which only looks, and the creates,
terminates and log reads that act. The rules here keep most of the quota for the
second kind:

- **The gap between early ticks.** While the account spends at most half of what
  every window can sustain until its reset (its remaining count spread over the
  seconds left), the quota is ample and ticks may follow each other a second apart, the
  watch's floor. Once it spends faster, a tick's list may use at most `LIST_SHARE` of
  what each window sustains: the gap stretches as any window runs low, up to the
  window's reset when it is spent. The hour and day windows count as much as the
  minute one (at the contract's example quotas the day allows 35 requests a minute).
- **Sharing one key.** Several reconcilers (clusters) on one RunPod account see the
  same counters fall faster than their own requests explain. Each estimates how many
  requests are sent per request of its own (`sharers`) and claims only its share: its
  create budget and its tick gap are divided or multiplied by it, and a reserve that
  grows with it is never spent, so that the stale view each one has of the counters
  does not end in a 429 storm. Within a window's last quarter they all space their
  requests alike, so that each gets an even turn.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The share of a window's sustainable rate that early ticks' list calls may take.
LIST_SHARE = 0.2
# The watch's floor between the starts of two ticks, whatever the quota.
MIN_TICK_GAP = 1.0
# Below this share of a window's quota requests are spread until the reset.
SPREAD_BELOW_SHARE = 0.25
# Requests per sharer left unspent in each window, for the others' requests in flight.
RESERVE_PER_SHARER = 2
# Samples older than this no longer count towards the number of sharers.
SHARER_MEMORY_SECONDS = 60.0
# Spending below this share of what every window sustains counts as ample.
AMPLE_SHARE = 0.5
# Our recent request rate is counted over this many seconds.
RATE_SPAN_SECONDS = 30.0
# Two answers further apart than this say nothing about concurrent users: the drop
# between them may be anyone's requests over a long idle time.
SHARER_SAMPLE_SECONDS = 2.0


@dataclass(frozen=True)
class Window:
    """One quota window as we last heard of it, projected to now."""

    name: str
    remaining: int
    """Requests the account may still send in this window (all users of the key)."""
    reset_in: float
    """Seconds until the window starts afresh."""
    quota: int | None = None
    """The window's whole quota, when the policy header named it."""
    age: float = 0.0
    """Seconds since the answer that told us `remaining`."""


@dataclass(frozen=True)
class DropSample:
    """Between two answers of one window: when, and how far its counter fell."""

    at: float
    drop: int
    """Requests the account sent in between, ours (one) included."""


def sharers(samples: Iterable[DropSample], now: float) -> float:
    """Requests the account sends per request of ours lately: 1 when we are alone.

    The median of the recent samples: another reconciler's burst between two of our
    answers shows as one large drop, which must not make us give up our share."""
    recent = [s.drop for s in samples if now - s.at <= SHARER_MEMORY_SECONDS]
    if not recent:
        return 1.0
    return max(1.0, float(statistics.median(recent)))


def reserve(share_count: float) -> int:
    """Requests of each window left unspent: none when we are alone on the key."""
    return RESERVE_PER_SHARER * math.ceil(share_count) if share_count > 1 else 0


def our_budget(windows: Sequence[Window], share_count: float = 1.0) -> int | None:
    """Requests we may send now: our share of the tightest window, minus the reserve.
    None before any header told us."""
    if not windows:
        return None
    spare = min(w.remaining for w in windows) - reserve(share_count)
    return max(0, math.floor(spare / share_count))


def request_delay(window: Window, share_count: float = 1.0) -> float:
    """Seconds to wait before our next request, as far as this window is concerned.

    A spent window (or one down to the reserve the sharers keep) waits for its reset; a
    window in its last quarter spreads what is left evenly until the reset; otherwise
    go at once. Every reconciler on a key spaces its requests alike, whatever it
    estimates of the others, so that each gets an even turn.
    """
    if window.reset_in <= 0:
        return 0.0
    spendable = window.remaining - reserve(share_count)
    if spendable <= 0:
        return window.reset_in
    low = window.quota is not None and window.remaining <= window.quota * SPREAD_BELOW_SHARE
    if not low:
        return 0.0
    # Spaced from the answer that told us: the time since then counts as waited.
    spacing = (window.reset_in + window.age) / spendable
    return max(0.0, spacing - window.age)


def recent_rate(request_times: Iterable[float], now: float, share_count: float = 1.0) -> float:
    """Requests per second the account sent lately: ours over the last span, times the
    sharers (their requests we only see as the counters' faster fall)."""
    ours = sum(1 for at in request_times if now - at <= RATE_SPAN_SECONDS)
    return ours / RATE_SPAN_SECONDS * share_count


def tick_gap(windows: Iterable[Window], share_count: float = 1.0, rate: float = 0.0) -> float:
    """Seconds that must pass between the starts of two ticks (the early ones at least),
    given what the windows have left and the account's recent request `rate`."""
    gaps = [_gap(w, share_count, rate) for w in windows]
    return max([MIN_TICK_GAP, *gaps])


def _gap(window: Window, share_count: float, rate: float) -> float:
    if window.reset_in <= 0:
        return 0.0
    ours = (window.remaining - reserve(share_count)) / share_count
    if ours <= 0:
        return window.reset_in
    sustainable = window.remaining / window.reset_in
    if rate <= AMPLE_SHARE * sustainable:
        return 0.0  # ample: at this pace the window ends with half of it unspent
    # One list call per tick at LIST_SHARE of our sustainable rate (ours / reset_in).
    return min(window.reset_in, window.reset_in / (ours * LIST_SHARE))


def ample(
    windows: Iterable[Window], share_count: float = 1.0, rate: float = 0.0, extra: int = 1
) -> bool:
    """Whether `extra` requests more, now, leave the quota ample: every window keeps our
    share beyond the reserve for them, and the account's recent `rate` with them added
    stays within AMPLE_SHARE of what the window sustains until its reset. Work that can
    wait (reading a starting instance's log to show its lines live) is done only then.
    No window heard of (a caller exempt from limits): ample."""
    for window in windows:
        if window.reset_in <= 0:
            continue
        ours = (window.remaining - reserve(share_count)) / share_count
        sustainable = window.remaining / window.reset_in
        if ours < extra or rate + extra / RATE_SPAN_SECONDS > AMPLE_SHARE * sustainable:
            return False
    return True
