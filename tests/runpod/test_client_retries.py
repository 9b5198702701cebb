"""Client retry rules: reads and DELETE retried on 429/5xx/transport with backoff;
creates, actions and registry creates retried only on 429; 4xx final; Retry-After
honoured on the simulated clock; attempts and total time bounded; an in-doubt create
(500 after creating, or a hang past the read timeout) is reported, not repeated."""

from __future__ import annotations

import logging

import pytest

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import ClientFactory, closed_port, create_request


def _calls(sim: RunPodSimulator, method: str, path_prefix: str) -> list[int]:
    return [r.status for r in sim.requests if r.method == method and r.path.startswith(path_prefix)]


def test_get_is_retried_on_503_then_succeeds(
    sim: RunPodSimulator, client: RunPodClient, clock: SimClock
) -> None:
    instance_id = sim.add_instance("retried")
    sim.faults.inject("GET", "/v2/pods/*", 503, count=2)
    before = clock.monotonic()
    assert client.instances.get(instance_id).id == instance_id
    assert _calls(sim, "GET", "/v2/pods/") == [503, 503, 200]
    # Backoff with jitter: 0.5 to 1 s, then 1 to 2 s.
    assert 1.5 <= clock.monotonic() - before <= 3.0


def test_attempts_are_bounded(sim: RunPodSimulator, make_client: ClientFactory) -> None:
    sim.faults.inject("GET", "/v2/pods", 503, count=10)
    with pytest.raises(errors.RunPodServerError):
        make_client(max_attempts=3).instances.list()
    assert _calls(sim, "GET", "/v2/pods") == [503, 503, 503]


def test_total_retry_time_is_bounded(sim: RunPodSimulator, make_client: ClientFactory) -> None:
    sim.faults.inject("GET", "/v2/pods", 429, count=5, retry_after=50)
    with pytest.raises(errors.RateLimitedError):
        make_client(max_attempts=10, max_retry_time=60).instances.list()
    # The second wait of 50 s would pass the 60 s budget: give up after two tries.
    assert _calls(sim, "GET", "/v2/pods") == [429, 429]


def test_retry_after_is_honoured(
    sim: RunPodSimulator, client: RunPodClient, clock: SimClock
) -> None:
    sim.faults.inject("GET", "/v2/pods", 429, retry_after=12)
    before = clock.monotonic()
    assert client.instances.list() == []
    assert clock.monotonic() - before == pytest.approx(12)
    assert _calls(sim, "GET", "/v2/pods") == [429, 200]


def test_create_is_not_retried_on_500_and_the_instance_exists(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    sim.faults.create_then_fail(status=500)
    with pytest.raises(errors.RunPodServerError) as raised:
        client.instances.create(create_request(name="in-doubt"))
    assert raised.value.in_doubt
    assert _calls(sim, "POST", "/v2/pods") == [500]
    assert [pod["name"] for pod in sim.instances.values()] == ["in-doubt"]


def test_create_is_retried_on_429(sim: RunPodSimulator, client: RunPodClient) -> None:
    sim.faults.inject("POST", "/v2/pods", 429, retry_after=3)
    instance = client.instances.create(create_request())
    assert _calls(sim, "POST", "/v2/pods") == [429, 201]
    assert list(sim.instances) == [instance.id]


def test_422_is_never_retried(sim: RunPodSimulator, client: RunPodClient) -> None:
    with pytest.raises(errors.InvalidRequestError) as raised:
        client.instances.create(create_request(name=""))
    assert "$.name" in str(raised.value)
    assert _calls(sim, "POST", "/v2/pods") == [422]


def test_400_is_never_retried(sim: RunPodSimulator, client: RunPodClient) -> None:
    with pytest.raises(errors.RejectedError):
        client.instances.create(create_request(ports=("22/udp",)))
    assert _calls(sim, "POST", "/v2/pods") == [400]


def test_registry_create_is_not_retried_on_503(sim: RunPodSimulator, client: RunPodClient) -> None:
    sim.faults.inject("POST", "/v2/registries", 503)
    with pytest.raises(errors.RunPodServerError) as raised:
        client.registries.create("hub", "me", "hunter2")
    assert raised.value.in_doubt
    assert _calls(sim, "POST", "/v2/registries") == [503]


def test_delete_of_a_gone_instance_is_success(sim: RunPodSimulator, client: RunPodClient) -> None:
    client.instances.delete("never-existed")
    assert _calls(sim, "DELETE", "/v2/pods/") == [404]


def test_delete_is_retried_on_502(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = sim.add_instance("doomed")
    sim.faults.inject("DELETE", "/v2/pods/*", 502)
    client.instances.delete(instance_id)
    assert _calls(sim, "DELETE", "/v2/pods/") == [502, 204]
    assert sim.instances == {}


def test_create_that_hangs_past_the_read_timeout_is_in_doubt(
    sim: RunPodSimulator, make_client: ClientFactory
) -> None:
    sim.faults.create_then_hang(seconds=1.5)
    client = make_client(read_timeout=0.5)
    with pytest.raises(errors.RunPodTransportError) as raised:
        client.instances.create(create_request(name="hung"))
    assert raised.value.in_doubt
    assert "may exist" in str(raised.value)
    assert [pod["name"] for pod in sim.instances.values()] == ["hung"]
    assert len(_calls(sim, "POST", "/v2/pods")) == 1


def test_each_retry_is_logged(
    sim: RunPodSimulator, client: RunPodClient, caplog: pytest.LogCaptureFixture
) -> None:
    sim.faults.inject("GET", "/v2/pods", 429, retry_after=3)
    caplog.set_level(logging.WARNING, logger="reconciler.adapters.runpod")
    client.instances.list()
    assert "GET /v2/pods: attempt 1/4 failed: " in caplog.text
    assert "will retry in 3.0 s" in caplog.text


def test_every_answer_is_reported_by_route(
    sim: RunPodSimulator, make_client: ClientFactory
) -> None:
    seen: list[tuple[str, int]] = []
    client = make_client(on_response=lambda route, status: seen.append((route, status)))
    instance_id = sim.add_instance("observed")
    sim.faults.inject("GET", "/v2/pods/*", 503)
    client.instances.get(instance_id)
    client.instances.delete(instance_id)
    assert seen == [
        ("GET /v2/pods/{id}", 503),
        ("GET /v2/pods/{id}", 200),
        ("DELETE /v2/pods/{id}", 204),
    ]


def test_transport_failures_are_reported_as_status_0(make_client: ClientFactory) -> None:
    seen: list[tuple[str, int]] = []
    client = make_client(
        base_url=f"http://127.0.0.1:{closed_port()}",
        max_attempts=2,
        on_response=lambda *a: seen.append(a),
    )
    with pytest.raises(errors.RunPodTransportError):
        client.catalog.gpu_types()
    assert seen == [("GET /v2/catalog/gpus", 0)] * 2
