"""How fast to spend RunPod's quota: pure decisions from what the RateLimit headers said.

RunPod counts every request of a user in three windows at once (minute, hour and day
in the contract's examples); a request needs room in all of them. The reconciler spends
requests on two kinds of work: a tick's list call, which only looks, and the creates,
terminates and log reads that act. The rules here keep most of the quota for the
second kind:

- **The gap between early ticks.** While the account spends at most half of what
  every window can sustain (its remaining count spread over the seconds to its reset,
  at most its quota over its length), the quota is ample and ticks may follow each
  other a second apart, the watch's floor. Once it spends faster, a tick's list may
  use at most `LIST_SHARE` of what each window sustains and of our own requests (up to
  `BUSY_GAP_CAP`): the gap stretches as any window runs low, up to the window's reset
  when it is spent. The hour and day windows count as much as the minute one (at the
  contract's example quotas the day allows 35 requests a minute), at any time of day.
- **Sharing one key.** Several reconcilers (clusters) on one RunPod account see the
  same counters fall faster than their own requests explain. Each estimates how many
  requests are sent per request of its own (`sharers`), and keeps a reserve that grows
  with it unspent, so that the stale view each one has of the counters does not end in
  a 429 storm. Nothing else depends on that estimate, which differs from one
  reconciler to the next: whatever must be alike for all of them (their spacing, their
  tick gap, their budget) is read off the counters they share.
- **Fair from the first tick.** A share estimate needs requests to compare, so it
  cannot stop the first reconciler to see pods from taking a whole window before the
  others have sent anything. Fairness comes from spacing instead: every reconciler on
  a key spaces its requests by the same rule, from the same shared counters (what is
  left of the tightest window spread evenly until its reset), so their rates are equal
  whoever started first. A reconciler spaces so from its first request once it has
  seen another user spend (`Company.SHARED`); one that has not yet watched the
  counters for a full minute (`Company.UNPROVEN`) spends freely only the first half of
  the tightest window; one that watched them fall by its own requests alone for a
  minute (`Company.ALONE`) spends all of it freely. Spacing
  costs a burst no throughput (the window allows as many requests, just not at once),
  only latency, and only while others may be there.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

# The share of a window's sustainable rate that early ticks' list calls may take.
LIST_SHARE = 0.2
# The watch's floor between the starts of two ticks, whatever the quota.
MIN_TICK_GAP = 1.0
# While the quota is not ample, the gap that keeps lists to their share of our own
# requests never grows beyond this (a pod's wait for its tick).
BUSY_GAP_CAP = 8.0
# Below this share of a window's quota requests are spread until the reset.
SPREAD_BELOW_SHARE = 0.25
# The same for the tightest window while we cannot yet tell whether we are alone on the
# key: the first half is ours to burst, the second half is spaced.
UNPROVEN_SPREAD_BELOW_SHARE = 0.5
# How long we must watch the counters fall by our own requests only to call the key ours
# (the shortest window the contract names: a minute).
ESTIMATION_SECONDS = 60.0
# Requests per sharer left unspent in each window, for the others' requests in flight.
RESERVE_PER_SHARER = 2
# Samples older than this no longer count towards the number of sharers.
SHARER_MEMORY_SECONDS = 60.0
# Spending below this share of what every window sustains counts as ample.
AMPLE_SHARE = 0.5
# Recent request rates are counted over this many seconds. Not much less: over 10 s, a
# tick or two after a pod came (a list, a catalog read, a create) looked like a rate
# the day cannot sustain, and the next tick waited 8 s; over 30 s, a steady trickle
# looks busy only after its first 10 to 15 s (a tick a second until then).
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
    length: float | None = None
    """The window's length in seconds, when the policy header named it."""
    age: float = 0.0
    """Seconds since the answer that told us `remaining`."""


@dataclass(frozen=True)
class DropSample:
    """Between two consecutive answers of ours (in one window instance): when the later
    came, how far the counter fell, and how far apart they were."""

    at: float
    drop: int
    """Requests the account sent in between, ours (one) included."""
    span: float = 0.0
    """Seconds between the two answers."""


class Company(Enum):
    """What the counters told us lately about other users of our key."""

    ALONE = "alone"
    """Watched for a full estimation period: they fell by our own requests only."""
    UNPROVEN = "unproven"
    """No one else seen yet, but not watched long enough to tell."""
    SHARED = "shared"
    """They fell by more than our requests: someone else spends the key too."""


def company(samples: Iterable[DropSample], observed_for: float, now: float) -> Company:
    """Whether others spend our key lately, from every pair of consecutive answers
    (however far apart: a drop of more than our one request between them is somebody
    else's), and whether we watched long enough to say we are alone."""
    if any(s.drop > 1 for s in samples if now - s.at <= SHARER_MEMORY_SECONDS):
        return Company.SHARED
    return Company.ALONE if observed_for >= ESTIMATION_SECONDS else Company.UNPROVEN


def sharers(samples: Iterable[DropSample], now: float) -> float:
    """Requests the account sends per request of ours lately: 1 when we are alone.

    Only answers close together count (two answers far apart say how many requests
    others sent over a long time, not per request of ours). The lower quartile of the
    recent samples, not their mean: another reconciler's burst between two of our
    answers shows as one large drop, and a reconciler that a burst left behind must not
    conclude from it that it has dozens of sharers and give up what is left of its
    share (its reserve and its budget grow with the estimate)."""
    recent = [
        s.drop
        for s in samples
        if now - s.at <= SHARER_MEMORY_SECONDS and s.span <= SHARER_SAMPLE_SECONDS
    ]
    if len(recent) < 2:
        return max(1.0, float(recent[0])) if recent else 1.0
    return max(1.0, statistics.quantiles(recent, n=4, method="inclusive")[0])


def reserve(share_count: float) -> int:
    """Requests of each window left unspent: none when we are alone on the key."""
    return RESERVE_PER_SHARER * math.ceil(share_count) if share_count > 1 else 0


def our_budget(windows: Sequence[Window], share_count: float = 1.0) -> int | None:
    """Requests we may send now: the tightest window, less the reserve the sharers keep.
    None before any header told us.

    Not divided by the sharers: each one's estimate of them differs and wavers, and a
    reconciler that divided by a larger one would plan fewer creates per tick than the
    others, for good. The share is claimed by spacing (`next_request_delay`) instead,
    which depends only on what all of them read alike."""
    if not windows:
        return None
    spare = min(w.remaining for w in windows) - reserve(share_count)
    return max(0, math.floor(spare))


def spread_below(who: Company) -> float:
    """The share of the tightest window's quota below which requests are spread: all of
    it when others spend the key (equal spacing is what makes their turns even), the
    second half while we cannot tell, none of it when the key is ours alone (no one to
    give a turn to; spreading its last quarter would only cost lists, one per tick that
    gets a request or two)."""
    if who is Company.SHARED:
        return 1.0
    return UNPROVEN_SPREAD_BELOW_SHARE if who is Company.UNPROVEN else 0.0


def next_request_delay(
    windows: Sequence[Window], share_count: float = 1.0, who: Company = Company.ALONE
) -> float:
    """Seconds to wait before our next request: the longest any window asks for. The
    tightest window (fewest requests left) is spread from `spread_below(who)` down, the
    others in their last quarter."""
    if not windows:
        return 0.0
    tightest = min(windows, key=lambda w: (w.remaining, w.reset_in))
    return max(
        request_delay(w, share_count, spread_below(who) if w is tightest else SPREAD_BELOW_SHARE)
        for w in windows
    )


def request_delay(
    window: Window, share_count: float = 1.0, spread_below: float = SPREAD_BELOW_SHARE
) -> float:
    """Seconds to wait before our next request, as far as this window is concerned.

    A spent window (or one down to the reserve the sharers keep) waits for its reset; a
    window below `spread_below` of its quota spreads what is left evenly until the
    reset; otherwise go at once. Every reconciler on a key spaces its requests alike,
    whatever it estimates of the others, so that each gets an even turn.
    """
    if window.reset_in <= 0:
        return 0.0
    spendable = window.remaining - reserve(share_count)
    if spendable <= 0:
        return window.reset_in
    if window.quota is None:
        low = spread_below >= 1.0
    else:
        low = window.remaining <= window.quota * spread_below
    if not low:
        return 0.0
    # Spaced from the answer that told us: the time since then counts as waited. By
    # what is left, not by what is left above our reserve: the reserve grows with our
    # estimate of the sharers, which differs from one of them to the next, while the
    # counter and the reset are the same for all; so the spacing is too.
    spacing = (window.reset_in + window.age) / window.remaining
    return max(0.0, spacing - window.age)


def recent_rate(request_times: Iterable[float], now: float) -> float:
    """Requests per second of ours lately: those answered over the last span."""
    ours = sum(1 for at in request_times if now - at <= RATE_SPAN_SECONDS)
    return ours / RATE_SPAN_SECONDS


def account_rate(samples: Iterable[DropSample], now: float) -> float:
    """Requests per second the account (every user of the key) sent lately: how far the
    counters fell over the last span, each drop counted for the part of its time span
    that lies in it. The same for every reconciler on the key, whatever its estimate
    of the others; 0 when we sent nothing lately (we then hardly know, and hardly
    need to)."""
    since = now - RATE_SPAN_SECONDS
    fell = 0.0
    for s in samples:
        start = s.at - s.span
        if s.at <= since:
            continue
        inside = 1.0 if s.span <= 0 else (s.at - max(start, since)) / s.span
        fell += max(0, s.drop) * inside
    return fell / RATE_SPAN_SECONDS


def tick_gap(
    windows: Sequence[Window],
    share_count: float = 1.0,
    rate: float = 0.0,
    work_rate: float | None = None,
    since_last_tick: float = 0.0,
) -> float:
    """Seconds that must pass between the starts of two ticks (the early ones at least),
    given what the windows have left, the account's recent request `rate` and, when
    known, the rate of our own requests that were not tick lists (`work_rate`).

    The gap is counted from the last tick's start, `since_last_tick` seconds ago, so a
    wait for a window's reset (which the window tells from now) is that much longer:
    otherwise a tick asked about some seconds after the last one would start that many
    seconds before the reset, and list while it could still plan nothing."""
    gaps = [_gap(w, share_count, rate, since_last_tick) for w in windows]
    # Busy: spending faster than some window sustains (a spent window only waits).
    busy = any(
        rate > AMPLE_SHARE * _sustainable(w) for w in windows if w.reset_in > 0 and w.remaining
    )
    if work_rate is not None and busy:
        gaps.append(work_gap(work_rate))
    return max([MIN_TICK_GAP, *gaps])


def gap_until_sendable(gap: float, since_last_list: float, delay: float) -> float:
    """The gap, counted from the last tick's start (about when its list was answered),
    stretched so that the next tick does not start before its own list may be sent:
    a tick that starts while the spacing holds its list back past the tick's deadline
    would only be skipped."""
    return max(gap, since_last_list + delay) if delay > 0 else gap


def work_gap(work_rate: float) -> float:
    """While the quota is not ample: the gap at which lists are at most `LIST_SHARE` of
    our requests, given how fast we send the others (creates, terminates, reads), up to
    `BUSY_GAP_CAP` so that a pod arriving when little else happens still gets its tick
    soon. A trickle of pods, each worth a create, thus gets ticks that gather several."""
    if work_rate <= 0:
        return BUSY_GAP_CAP
    return min(BUSY_GAP_CAP, (1 - LIST_SHARE) / (LIST_SHARE * work_rate))


def _sustainable(window: Window) -> float:
    """Requests a second the window sustains: what is left of it over the time to its
    reset, but never more than its quota over its length (so that a day or an hour with
    much left late in it does not shrink the gap, only to spend that on lists)."""
    left = window.remaining / window.reset_in
    if window.quota and window.length:
        return min(left, window.quota / window.length)
    return left


def _gap(window: Window, share_count: float, rate: float, since_last_tick: float) -> float:
    if window.reset_in <= 0:
        return 0.0
    # The reset, counted from the last tick's start like every gap.
    until_reset = since_last_tick + window.reset_in
    # Not divided by the sharers, for the reason `our_budget` gives: every reconciler
    # on a key then keeps the same gap, and their lists together stay few because each
    # one's ticks are long (its creates are spaced) and its lists a share of its work.
    left = window.remaining - reserve(share_count)
    if left <= 0:
        return until_reset
    if rate <= AMPLE_SHARE * _sustainable(window):
        return 0.0  # ample: at this pace the window ends with half of it unspent
    # One list call per tick at LIST_SHARE of what the window sustains: of what is left
    # until its reset, and of its quota over its length.
    floor = 0.0
    if window.quota and window.length:
        floor = window.length / (window.quota * LIST_SHARE)
    return max(floor, min(until_reset, window.reset_in / (left * LIST_SHARE)))


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
        # Divided by the sharers here (unlike the budget and the gap): this is for work
        # that may be skipped, and skipping it when in doubt costs no one a turn.
        ours = (window.remaining - reserve(share_count)) / share_count
        if ours < extra or rate + extra / RATE_SPAN_SECONDS > AMPLE_SHARE * _sustainable(window):
            return False
    return True
