"""Fixtures: a simulator on a fresh simulated clock and real clients talking to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, ClientFactory


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def sim(clock: SimClock) -> Iterator[RunPodSimulator]:
    with RunPodSimulator(API_KEY, clock=clock) as simulator:
        yield simulator


@pytest.fixture
def make_client(sim: RunPodSimulator, clock: SimClock) -> Iterator[ClientFactory]:
    """Clients whose waits move the simulated clock; keyword arguments override."""
    clients: list[RunPodClient] = []

    def make(**overrides: Any) -> RunPodClient:
        settings: dict[str, Any] = {
            "api_key": API_KEY,
            "base_url": sim.base_url,
            "read_timeout": 5,
            "sleep": clock.sleep,
            "monotonic": clock.monotonic,
        }
        settings.update(overrides)
        clients.append(RunPodClient(**settings))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: ClientFactory) -> RunPodClient:
    return make_client()
