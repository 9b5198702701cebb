"""Client rate limiting: parsing of the RateLimit and RateLimit-Policy structured
fields, the pacing decisions, the reported budget, and the end-to-end promise that a
burst of 100 creates against a 60-per-minute quota sees no 429 at all."""

from __future__ import annotations

import pytest

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.ratelimit import RateLimiter, parse_members
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, create_request

POLICY = '"minute";q=60;w=60, "hour";q=3000;w=3600, "day";q=50000;w=86400'


def _limiter(state: str, now: float = 0.0) -> RateLimiter:
    limiter = RateLimiter()
    limiter.observe({"RateLimit": state, "RateLimit-Policy": POLICY}, now)
    return limiter


def test_structured_field_members_are_parsed() -> None:
    header = '"minute";r=0;t=12, "hour";r=2800;t=1812, day;r=49500;t=45012'
    assert parse_members(header) == {
        "minute": {"r": 0, "t": 12},
        "hour": {"r": 2800, "t": 1812},
        "day": {"r": 49500, "t": 45012},
    }


def test_junk_parameters_are_skipped() -> None:
    assert parse_members('"minute";r=abc;t=5;x, ,') == {"minute": {"t": 5}}


def test_a_spent_window_waits_until_it_resets() -> None:
    limiter = _limiter('"minute";r=0;t=12, "hour";r=2800;t=1812', now=100.0)
    assert limiter.delay(100.0) == pytest.approx(12)
    assert limiter.delay(105.0) == pytest.approx(7)
    assert limiter.delay(112.0) == 0


def test_plenty_left_goes_at_once() -> None:
    assert _limiter('"minute";r=40;t=30').delay(0.0) == 0


def test_the_last_quarter_is_spread_until_the_reset() -> None:
    limiter = _limiter('"minute";r=10;t=30', now=0.0)
    assert limiter.delay(0.0) == pytest.approx(3)
    assert limiter.delay(2.0) == pytest.approx(1)


def test_budget_is_the_smallest_window() -> None:
    limiter = _limiter('"minute";r=59;t=60, "hour";r=7;t=3600, "day";r=49000;t=80000')
    assert limiter.budget(0.0) == 7


def test_budget_after_a_reset_is_the_full_quota() -> None:
    limiter = _limiter('"minute";r=0;t=10')
    assert limiter.budget(5.0) == 0
    assert limiter.budget(10.0) == 60


def test_budget_is_unknown_before_any_header() -> None:
    assert RateLimiter().budget(0.0) is None


def test_client_reports_its_budget(client: RunPodClient) -> None:
    assert client.rate_budget is None
    client.instances.list()
    assert client.rate_budget == 59


def test_a_spent_minute_is_waited_out_not_hit(clock: SimClock) -> None:
    with RunPodSimulator(API_KEY, clock=clock, quota=(3, 100, 1000)) as sim:
        client = RunPodClient(API_KEY, sim.base_url, sleep=clock.sleep, monotonic=clock.monotonic)
        for _ in range(4):
            client.instances.list()
        client.close()
        assert [request.status for request in sim.requests] == [200] * 4
    assert clock.monotonic() - SimClock().monotonic() == pytest.approx(60)


def test_a_burst_of_100_creates_never_hits_429(
    sim: RunPodSimulator, client: RunPodClient, clock: SimClock
) -> None:
    started = clock.monotonic()
    for index in range(100):
        client.instances.create(create_request(name=f"burst-{index}"))
    statuses = [request.status for request in sim.requests]
    assert statuses == [201] * 100
    assert len(sim.instances) == 100
    # 100 requests at 60 per minute need the second minute, and not much more.
    assert 60 <= clock.monotonic() - started <= 120
