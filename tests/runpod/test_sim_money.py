"""The RunPod simulator's money routes, held to the v2 contract: PATCH /v2/pods/{id}
(env replaced whole, closed body), registry get/delete (refused while a pod uses it),
the billing ledger and its bucketed queries (snapping, lastN, validation, TERMINATED
pods still billed for their past, a stopped pod's disk), and recorded headers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import requests

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.contract import OWNER_ENV
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.billing import DISK_USD_PER_GB_HOUR
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, create_request, pod_action


@pytest.fixture
def http(sim: RunPodSimulator) -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {API_KEY}"
        yield session


def test_patch_replaces_the_env_whole(
    sim: RunPodSimulator, client: RunPodClient, http: requests.Session
) -> None:
    instance = client.instances.create(create_request(env={OWNER_ENV: "me", "A": "1"}))
    answer = http.patch(f"{sim.base_url}/v2/pods/{instance.id}", json={"env": {"B": "2"}})
    assert answer.status_code == 200 and answer.json()["env"] == {"B": "2"}
    assert client.instances.update_env(instance.id, {"C": "3"}).env == {"C": "3"}
    assert sim.instances[instance.id]["name"] == instance.name  # absent fields untouched


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"envs": {}}, 422),
        ({"env": {"A": 1}}, 422),
        ({"disk": 0}, 422),
        ("x", 422),
        ({"ports": ["22/udp"]}, 400),
        ({"registry": "reg_nope"}, 400),
    ],
)
def test_patch_checks_its_body(
    sim: RunPodSimulator, client: RunPodClient, http: requests.Session, body: object, status: int
) -> None:
    instance = client.instances.create(create_request())
    assert http.patch(f"{sim.base_url}/v2/pods/{instance.id}", json=body).status_code == status
    assert http.patch(f"{sim.base_url}/v2/pods/nope", json={}).status_code == 404


def test_a_registry_in_use_cannot_be_deleted(
    sim: RunPodSimulator, client: RunPodClient, http: requests.Session
) -> None:
    used = client.registries.create("used", "u", "p")
    free = client.registries.create("free", "u", "p")
    instance = client.instances.create(create_request(registry_auth_id=used.id))
    assert client.registries.delete(used.id) is False
    assert http.get(f"{sim.base_url}/v2/registries/{used.id}").json() == {
        "id": used.id,
        "name": "used",
    }
    assert client.registries.delete(free.id) is True
    assert http.get(f"{sim.base_url}/v2/registries/{free.id}").status_code == 404
    client.instances.delete(instance.id)
    assert client.registries.delete(used.id) is True
    assert client.registries.delete(used.id) is True  # already gone counts as deleted


def _billing(http: requests.Session, sim: RunPodSimulator, **params: str) -> requests.Response:
    return http.get(f"{sim.base_url}/v2/billing/pods", params=params)


def test_billing_follows_the_ledger_in_snapped_buckets(
    sim: RunPodSimulator, client: RunPodClient, clock: SimClock, http: requests.Session
) -> None:
    start = clock.now()
    instance = client.instances.create(create_request(container_disk_gb=40))
    price = sim.instances[instance.id]["cost"]
    clock.advance(5400)  # 1.5 h running
    pod_action(sim, instance.id, "stop")
    clock.advance(3600)  # 1 h stopped: disk only
    client.instances.delete(instance.id)
    clock.advance(7200)
    disk = DISK_USD_PER_GB_HOUR * 40
    expected = price * 1.5 + disk * 2.5
    assert sim.billed(instance.id)["total"] == pytest.approx(expected)
    answer = _billing(
        http, sim, bucketSize="hour", startTime=_iso(start), endTime=_iso(clock.now())
    ).json()
    assert answer["metadata"]["totals"]["totalAmount"] == pytest.approx(expected, abs=1e-5)
    assert {r["podId"] for r in answer["records"]} == {instance.id}
    first = answer["records"][0]
    assert first["startTime"].endswith(":00:00Z")  # snapped to whole hours
    assert first["gpuAmount"] + first["diskAmount"] == pytest.approx(first["totalAmount"])
    # Deleted: still billed for its past, and served TERMINATED by id.
    assert client.instances.get(instance.id).status.value == "TERMINATED"
    day = _billing(http, sim, lastN="1", bucketSize="day").json()
    assert day["metadata"]["query"]["startTime"].endswith("T00:00:00Z")
    aggregate = http.get(
        f"{sim.base_url}/v2/billing", params={"lastN": "2", "bucketSize": "day"}
    ).json()
    assert aggregate["metadata"]["totals"]["podGpuAmount"] == pytest.approx(price * 1.5, abs=1e-5)


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"bucketSize": "minute"}, 422),
        ({"lastN": "0"}, 422),
        ({"startTime": "yesterday"}, 422),
        ({"lastN": "2", "startTime": "2026-01-01T00:00:00Z"}, 400),
        ({"startTime": "2026-01-02T00:00:00Z", "endTime": "2026-01-01T00:00:00Z"}, 400),
    ],
)
def test_billing_queries_are_validated(
    sim: RunPodSimulator, http: requests.Session, params: dict[str, str], status: int
) -> None:
    assert _billing(http, sim, **params).status_code == status


def test_the_client_reads_pod_billing(
    sim: RunPodSimulator, client: RunPodClient, clock: SimClock
) -> None:
    instance = client.instances.create(create_request())
    clock.advance(7200)
    records = client.billing.instances(datetime(2000, 1, 1, tzinfo=UTC), clock.now())
    assert sum(r.total_usd for r in records) == pytest.approx(
        sim.billed(instance.id)["total"], abs=1e-5
    )


def test_request_headers_are_recorded_with_the_key_masked(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    client.instances.list()
    headers = sim.requests[-1].headers
    assert headers["Authorization"] == "***"
    assert API_KEY not in str(sim.requests)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
