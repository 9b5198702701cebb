"""Several reconcilers on one RunPod key share its quota fairly, from the first burst.

Real `RunPodClient`s talk HTTP to one `RunPodSimulator`; they take turns on one
simulated clock (`Turns`): each waits in the client's own pacing sleep or in the time
a request takes, and the clock moves to the earliest wake-up. Nothing is slept for
real. The quota is the contract's example (60 a minute, 3 000 an hour, 50 000 a day).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.errors import RateLimitedError
from reconciler.core.capacity.pacing import Company
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY

# What one request takes: the others may send meanwhile.
LATENCY = 0.05
# The reconcilers' idle ticks before the pods come: one list each every 15 s.
IDLE_INTERVAL = 15.0


class Turns:
    """Threads that run one at a time on a simulated clock: a thread's sleep hands the
    turn to the thread that wakes first, moving the clock to that moment."""

    def __init__(self, clock: SimClock, names: list[str]) -> None:
        self.clock = clock
        self._live = set(names)
        self._wake: dict[str, float] = {}
        self._turn: str | None = None
        self._cond = threading.Condition()

    def sleeper(self, name: str) -> Callable[[float], None]:
        def sleep(seconds: float) -> None:
            with self._cond:
                self._wake[name] = self.clock.monotonic() + max(0.0, seconds)
                self._turn = None
                self._hand_over()
                self._cond.wait_for(lambda: self._turn == name)

        return sleep

    def done(self, name: str) -> None:
        with self._cond:
            self._live.discard(name)
            self._turn = None
            self._hand_over()

    def _hand_over(self) -> None:
        if self._turn is not None or len(self._wake) < len(self._live) or not self._wake:
            return  # someone still runs, or has not yet said when it wakes
        name = min(self._wake, key=lambda n: (self._wake[n], n))
        due = self._wake.pop(name)
        self.clock.advance(max(0.0, due - self.clock.monotonic()))
        self._turn = name
        self._cond.notify_all()


@dataclass
class Reconciler:
    """A client that idles (a list every 15 s) and then spends as fast as it may."""

    name: str
    busy_from: float
    """Simulated seconds (from the run's start) when its pods arrive."""
    idle_from: float = 0.0
    sent: list[float] = field(default_factory=list)
    """When each of its requests was answered with success (simulated seconds)."""
    statuses: Counter[int] = field(default_factory=Counter)
    company: Company | None = None
    """What it thought of the key when its pods arrived."""


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def sim(clock: SimClock) -> Iterator[RunPodSimulator]:
    with RunPodSimulator(API_KEY, clock=clock, quota=(60, 3000, 50000)) as simulator:
        yield simulator


def run(sim: RunPodSimulator, clock: SimClock, reconcilers: list[Reconciler], until: float) -> None:
    start = clock.monotonic()
    turns = Turns(clock, [r.name for r in reconcilers])

    def work(r: Reconciler) -> None:
        sleep = turns.sleeper(r.name)
        client = RunPodClient(
            API_KEY,
            sim.base_url,
            sleep=sleep,
            monotonic=clock.monotonic,
            on_response=lambda _route, status: r.statuses.update([status]),
        )
        try:
            sleep(r.idle_from)
            while clock.monotonic() - start < r.busy_from:
                client.instances.list()
                sleep(min(IDLE_INTERVAL, r.busy_from - (clock.monotonic() - start)))
            r.company = client.transport._limiter.company(clock.monotonic())
            while clock.monotonic() - start < until:
                try:
                    client.instances.list()
                    r.sent.append(clock.monotonic() - start)
                except RateLimitedError:
                    pass
                sleep(LATENCY)
        finally:
            client.close()
            turns.done(r.name)

    threads = [threading.Thread(target=work, args=(r,), name=r.name) for r in reconcilers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)


def shares(reconcilers: list[Reconciler], start: float, end: float) -> dict[str, float]:
    counts = {r.name: sum(1 for at in r.sent if start <= at < end) for r in reconcilers}
    total = sum(counts.values())
    return {name: n / total for name, n in counts.items()}


def test_three_reconcilers_that_saw_each_other_idle_share_the_first_minute_evenly(
    sim: RunPodSimulator, clock: SimClock
) -> None:
    # The pods arrive at a, then b half a second later, then c: a ticks first.
    reconcilers = [
        Reconciler("a", busy_from=60.0, idle_from=0.0),
        Reconciler("b", busy_from=60.5, idle_from=5.0),
        Reconciler("c", busy_from=61.0, idle_from=10.0),
    ]
    run(sim, clock, reconcilers, until=240.0)
    assert [r.company for r in reconcilers] == [Company.SHARED] * 3
    assert all(r.statuses[429] == 0 for r in reconcilers)
    # The first minute after the pods came, and the three minutes in all.
    for start, end in ((60.0, 120.0), (60.0, 240.0)):
        assert min(shares(reconcilers, start, end).values()) >= 0.3
    # Spacing costs no throughput: nearly all of each minute window went to the work
    # (less the reserve the sharers keep for their requests in flight).
    busy = sum(1 for r in reconcilers for at in r.sent if 120.0 <= at < 240.0)
    assert busy >= 2 * 60 - 2 * 8


def test_three_fresh_reconcilers_started_together_end_up_even(
    sim: RunPodSimulator, clock: SimClock
) -> None:
    # No idle minute to learn of each other: the first may burst half a window alone.
    reconcilers = [
        Reconciler("a", busy_from=0.0),
        Reconciler("b", busy_from=0.5, idle_from=0.5),
        Reconciler("c", busy_from=1.0, idle_from=1.0),
    ]
    run(sim, clock, reconcilers, until=180.0)
    assert all(r.statuses[429] == 0 for r in reconcilers)
    assert min(shares(reconcilers, 0.0, 180.0).values()) >= 0.25
    assert min(shares(reconcilers, 60.0, 180.0).values()) >= 0.3


def test_a_lone_reconciler_that_watched_a_minute_bursts_and_uses_every_window(
    sim: RunPodSimulator, clock: SimClock
) -> None:
    [alone] = reconcilers = [Reconciler("alone", busy_from=60.0)]
    run(sim, clock, reconcilers, until=240.0)
    assert alone.company is Company.ALONE
    assert alone.statuses[429] == 0
    # Its first 55 requests went at once (all that was left of the window).
    first = sorted(alone.sent)[:55]
    assert first[-1] - first[0] <= 55 * LATENCY + 0.01
    # Two whole minute windows: every request of them spent.
    assert sum(1 for at in alone.sent if 120.0 <= at < 240.0) == 2 * 60


def test_a_fresh_lone_reconciler_bursts_half_a_window_then_spaces_the_rest(
    sim: RunPodSimulator, clock: SimClock
) -> None:
    [fresh] = reconcilers = [Reconciler("fresh", busy_from=0.0)]
    run(sim, clock, reconcilers, until=60.0)
    assert fresh.statuses[429] == 0
    first_half = sorted(fresh.sent)[:29]
    assert first_half[-1] - first_half[0] <= 29 * LATENCY + 0.01
    # The minute's other half is spaced, not lost.
    assert len(fresh.sent) >= 60 - 2
