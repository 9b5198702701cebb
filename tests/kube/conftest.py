"""Fixtures: a simulated API server on 127.0.0.1 with its own SimClock, and the adapter
talking to it over HTTP through the official client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reconciler.adapters.kube.client import KubeClient
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.simulator import KubeSimulator

PodFactory = Callable[..., dict[str, Any]]


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def sim(clock: SimClock) -> Iterator[KubeSimulator]:
    with KubeSimulator(clock=clock) as simulator:
        yield simulator


@pytest.fixture
def kube(sim: KubeSimulator, clock: SimClock) -> Iterator[KubeClient]:
    client = KubeClient(sim.api_client(), now=clock.now)
    yield client
    client.close()


@pytest.fixture
def make_pod(sim: KubeSimulator) -> PodFactory:
    """Create a pod in the simulator: make_pod("p", node="virtual-runpod", labels=...)."""

    def create(
        name: str, namespace: str = "default", node: str | None = None, **metadata: Any
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
        if node:
            spec["nodeName"] = node
        return sim.create_pod(
            {"metadata": {"name": name, "namespace": namespace, **metadata}, "spec": spec}
        )

    return create
