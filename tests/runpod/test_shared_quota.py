"""Several reconcilers on one RunPod key (one account, one quota): three real clients
take turns against one simulator, each seeing the counters fall three times faster
than its own requests explain. Each learns it shares the key, keeps a reserve for the
others' requests in flight and spaces its own, so that none of them meets a 429."""

from __future__ import annotations

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod import RunPodSimulator

from .helpers import API_KEY


def test_three_clients_on_one_key_never_meet_a_429(clock: SimClock) -> None:
    with RunPodSimulator(API_KEY, clock=clock) as sim:
        clients = [RunPodClient(API_KEY, sim.base_url, sleep=clock.sleep,
                                monotonic=clock.monotonic) for _ in range(3)]
        started = clock.monotonic()
        for _ in range(100):  # 300 requests: five minutes of the 60-a-minute quota
            for client in clients:
                client.list_instances()
        for client in clients:
            client.close()
        statuses = [request.status for request in sim.requests]
    assert statuses.count(429) == 0
    assert statuses == [200] * 300
    # Not much slower than the quota allows: 300 requests need five minutes at least.
    assert clock.monotonic() - started <= 7 * 60
