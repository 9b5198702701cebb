"""Client errors: every HTTP failure maps to its own class with status, detail and
in_doubt; transport failures never surface as `requests` exceptions; and the API key
appears in no log line, message, repr or str, whatever went wrong."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, ClientFactory, closed_port, create_request


@dataclass(frozen=True)
class Case:
    error: type[errors.RunPodError]
    status: int | None
    in_doubt: bool
    provoke: Callable[[RunPodSimulator, RunPodClient], object]


def _failing_create(sim: RunPodSimulator, client: RunPodClient) -> object:
    sim.faults.create_then_fail(status=502)
    return client.instances.create(create_request())


def _with_fault(
    method: str, path: str, status: int, call: Callable[[RunPodClient], object]
) -> Callable[[RunPodSimulator, RunPodClient], object]:
    def provoke(sim: RunPodSimulator, client: RunPodClient) -> object:
        sim.faults.inject(method, path, status, count=10)
        return call(client)

    return provoke


def _no_balance(sim: RunPodSimulator, client: RunPodClient) -> object:
    sim.account.set_balance(0)
    return client.instances.create(create_request())


CASES = {
    "400 unknown gpu": Case(
        errors.RejectedError,
        400,
        False,
        lambda sim, client: client.instances.create(create_request(gpu_type_id="NVIDIA GTX 1")),
    ),
    "402 balance": Case(errors.InsufficientBalanceError, 402, False, _no_balance),
    "403 pool": Case(
        errors.PermissionDeniedError,
        403,
        False,
        _with_fault(
            "POST", "/v2/pods", 403, lambda client: client.instances.create(create_request())
        ),
    ),
    "404 pod": Case(
        errors.RunPodNotFound, 404, False, lambda sim, client: client.instances.get("nope")
    ),
    "409 get": Case(
        errors.RunPodConflict,
        409,
        False,
        _with_fault("GET", "/v2/pods/*", 409, lambda client: client.instances.get("any")),
    ),
    "422 create": Case(
        errors.InvalidRequestError,
        422,
        False,
        lambda sim, client: client.instances.create(create_request(name="")),
    ),
    "429 list": Case(
        errors.RateLimitedError,
        429,
        False,
        _with_fault("GET", "/v2/pods", 429, lambda client: client.instances.list()),
    ),
    "500 list": Case(
        errors.RunPodServerError,
        500,
        False,
        _with_fault("GET", "/v2/pods", 500, lambda client: client.instances.list()),
    ),
    "502 create": Case(errors.RunPodServerError, 502, True, _failing_create),
}


@pytest.mark.parametrize("name", CASES)
def test_each_status_raises_its_error_class(
    name: str, sim: RunPodSimulator, make_client: ClientFactory
) -> None:
    case = CASES[name]
    client = make_client(max_attempts=2)
    with pytest.raises(case.error) as raised:
        case.provoke(sim, client)
    assert type(raised.value) is case.error
    assert raised.value.status == case.status
    assert raised.value.in_doubt is case.in_doubt
    assert raised.value.detail


def test_wrong_key_is_an_authentication_error(make_client: ClientFactory) -> None:
    client = make_client(api_key="rpa_WRONG0KEY")
    with pytest.raises(errors.AuthenticationError) as raised:
        client.instances.list()
    assert raised.value.status == 401
    assert "bearer token" in (raised.value.detail or "")


def test_rate_limited_error_carries_retry_after(
    sim: RunPodSimulator, make_client: ClientFactory
) -> None:
    sim.faults.inject("GET", "/v2/pods", 429, retry_after=17)
    with pytest.raises(errors.RateLimitedError) as raised:
        make_client(max_attempts=1).instances.list()
    assert raised.value.retry_after == 17


def test_in_doubt_create_says_the_instance_may_exist(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    sim.faults.create_then_fail()
    with pytest.raises(errors.RunPodServerError) as raised:
        client.instances.create(create_request())
    assert raised.value.in_doubt
    assert "may exist" in str(raised.value)


def test_refused_connection_is_a_transport_error(make_client: ClientFactory) -> None:
    client = make_client(base_url=f"http://127.0.0.1:{closed_port()}", max_attempts=2)
    with pytest.raises(errors.RunPodTransportError) as raised:
        client.instances.list()
    assert raised.value.status is None
    assert not raised.value.in_doubt  # a read: nothing can have happened


def test_refused_create_is_in_doubt(make_client: ClientFactory) -> None:
    client = make_client(base_url=f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(errors.RunPodTransportError) as raised:
        client.instances.create(create_request())
    assert raised.value.in_doubt


def test_the_key_never_leaks(
    sim: RunPodSimulator, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    for name, case in CASES.items():
        client = make_client(max_attempts=2)
        seen.append(repr(client))
        with pytest.raises(errors.RunPodError) as raised:
            case.provoke(sim, client)
        seen.extend(_renderings(raised.value))
        sim.reset()
        assert raised.value.status == case.status, name
    transport = make_client(base_url=f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(errors.RunPodTransportError) as raised:
        transport.instances.create(create_request())
    seen.extend(_renderings(raised.value))
    seen.append(caplog.text)
    assert "attempt 1/2 failed" in caplog.text  # the logs were really captured
    assert all(API_KEY not in text for text in seen)


def _renderings(error: errors.RunPodError) -> list[str]:
    cause = error.__cause__
    return [str(error), repr(error), str(error.detail), repr(error.args), str(cause), repr(cause)]
