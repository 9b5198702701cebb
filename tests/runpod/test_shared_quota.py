"""Several reconcilers on one RunPod key (one account, one quota): three real clients
take turns against one simulator, each seeing the counters fall three times faster
than its own requests explain. Each learns it shares the key, keeps a reserve for the
others' requests in flight and spaces its own, so that none of them meets a 429. And the
hour window binds like the minute one: the simulator refuses with the contract's 429
naming the window, and the client waits it out instead of meeting it."""

from __future__ import annotations

import requests

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY


def test_three_clients_on_one_key_never_meet_a_429(clock: SimClock) -> None:
    with RunPodSimulator(API_KEY, clock=clock) as sim:
        clients = [
            RunPodClient(API_KEY, sim.base_url, sleep=clock.sleep, monotonic=clock.monotonic)
            for _ in range(3)
        ]
        started = clock.monotonic()
        for _ in range(100):  # 300 requests: five minutes of the 60-a-minute quota
            for client in clients:
                client.instances.list()
        for client in clients:
            client.close()
        statuses = [request.status for request in sim.requests]
    assert statuses.count(429) == 0
    assert statuses == [200] * 300
    # Not much slower than the quota allows: 300 requests need five minutes at least.
    assert clock.monotonic() - started <= 7 * 60


def test_a_spent_hour_window_answers_429_naming_it(clock: SimClock) -> None:
    with RunPodSimulator(API_KEY, clock=clock, quota=(100, 3, 1000)) as sim:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {API_KEY}"
        answers = [session.get(f"{sim.base_url}/v2/pods", timeout=5) for _ in range(4)]
        session.close()
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    refused = answers[-1]
    assert refused.json()["detail"] == "rate limit exceeded for the hour window"
    assert int(refused.headers["Retry-After"]) == 3600
    assert '"hour";r=0;t=3600' in refused.headers["RateLimit"]
    assert '"hour";q=3;w=3600' in refused.headers["RateLimit-Policy"]


def test_the_client_waits_out_a_spent_hour_too(clock: SimClock) -> None:
    with RunPodSimulator(API_KEY, clock=clock, quota=(100, 3, 1000)) as sim:
        client = RunPodClient(API_KEY, sim.base_url, sleep=clock.sleep, monotonic=clock.monotonic)
        started = clock.monotonic()
        for _ in range(4):
            client.instances.list()
        client.close()
        assert [request.status for request in sim.requests] == [200] * 4
    assert clock.monotonic() - started >= 3600
