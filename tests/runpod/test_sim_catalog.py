"""Simulated catalog and placement, through the real client: GPU types with prices
and per-cloud ceilings, availability overall and per data center derived from free
capacity and filtered by GPU count and cloud; creates that respect dataCenterIds and
cloud, and fail with 400 (no capacity, unknown GPU, not offered) or 402 (balance)."""

from __future__ import annotations

import pytest
import requests

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.domain import Availability, Cloud
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, RTX_4090, create_request

H100 = "NVIDIA H100 80GB HBM3"
B200 = "NVIDIA B200"


def test_catalog_lists_realistic_gpu_types(client: RunPodClient) -> None:
    gpus = {gpu.id: gpu for gpu in client.catalog.gpu_types()}
    assert len(gpus) == 6
    rtx = gpus[RTX_4090]
    assert (rtx.memory_gb, rtx.secure_price, rtx.community_price) == (24, 0.69, 0.34)
    assert rtx.availability is Availability.HIGH
    assert {stock.id for stock in rtx.datacenters} == {"US-TX-3", "EU-RO-1", "US-KS-2"}
    assert gpus[H100].community is False and gpus[H100].max_count(Cloud.COMMUNITY) == 0


def test_a_gpu_without_stock_has_no_data_centers(client: RunPodClient) -> None:
    b200 = next(gpu for gpu in client.catalog.gpu_types() if gpu.id == B200)
    assert b200.availability is Availability.NONE and b200.datacenters == ()


def test_availability_follows_the_gpu_count(client: RunPodClient) -> None:
    def level(count: int) -> Availability:
        gpus = client.catalog.gpu_types(gpu_count=count)
        return next(gpu.availability for gpu in gpus if gpu.id == H100)

    assert level(1) is Availability.LOW
    assert level(4) is Availability.NONE


def test_availability_follows_the_cloud(client: RunPodClient) -> None:
    gpus = {gpu.id: gpu for gpu in client.catalog.gpu_types(cloud=Cloud.COMMUNITY)}
    assert gpus[H100].availability is Availability.NONE
    assert gpus[RTX_4090].availability is Availability.HIGH


def test_availability_follows_capacity(sim: RunPodSimulator, client: RunPodClient) -> None:
    sim.account.set_capacity(H100, "US-TX-3", 0)
    sim.account.set_capacity(H100, "US-KS-2", 40)
    h100 = next(gpu for gpu in client.catalog.gpu_types() if gpu.id == H100)
    stock = {item.id: item.availability for item in h100.datacenters}
    assert stock == {
        "US-TX-3": Availability.NONE,
        "EU-RO-1": Availability.NONE,
        "US-KS-2": Availability.HIGH,
    }


def test_catalog_query_is_the_documented_one(sim: RunPodSimulator, client: RunPodClient) -> None:
    client.catalog.gpu_types(gpu_count=2, cloud=Cloud.SECURE)
    assert sim.requests[-1].query == {
        "include": "AVAILABILITY",
        "product": "POD",
        "count": "2",
        "cloud": "SECURE",
    }


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"include": "AVAILABILITY"}, 400),
        ({"product": "POD"}, 400),
        ({"count": "2"}, 400),
        ({"include": "PRICES", "product": "POD"}, 422),
        ({"include": "AVAILABILITY", "product": "POD", "cloud": "MOON"}, 422),
        ({"include": "AVAILABILITY", "product": "POD", "count": "zero"}, 422),
    ],
)
def test_catalog_query_rules(sim: RunPodSimulator, query: dict[str, str], status: int) -> None:
    answer = requests.get(
        f"{sim.base_url}/v2/catalog/gpus",
        params=query,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=5,
    )
    assert answer.status_code == status


def test_create_respects_data_centers(client: RunPodClient) -> None:
    instance = client.instances.create(create_request(datacenter_ids=("US-KS-2",)))
    assert instance.datacenter_id == "US-KS-2"


def test_create_picks_the_data_center_with_most_room(client: RunPodClient) -> None:
    assert client.instances.create(create_request()).datacenter_id == "US-TX-3"


def test_no_capacity_in_the_wanted_data_center(client: RunPodClient) -> None:
    with pytest.raises(errors.RejectedError, match="no capacity"):
        client.instances.create(create_request(gpu_type_id=H100, datacenter_ids=("EU-RO-1",)))


def test_unknown_gpu_is_rejected(client: RunPodClient) -> None:
    with pytest.raises(errors.RejectedError, match="unknown GPU"):
        client.instances.create(create_request(gpu_type_id="NVIDIA Voodoo 2"))


def test_cloud_must_offer_the_gpu(client: RunPodClient) -> None:
    with pytest.raises(errors.RejectedError, match="COMMUNITY"):
        client.instances.create(create_request(gpu_type_id=H100, cloud=Cloud.COMMUNITY))


def test_gpu_count_above_the_ceiling_is_rejected(client: RunPodClient) -> None:
    with pytest.raises(errors.RejectedError, match="not offered"):
        client.instances.create(create_request(gpu_count=5, cloud=Cloud.COMMUNITY))


def test_cost_is_price_times_count_per_cloud(client: RunPodClient) -> None:
    instance = client.instances.create(create_request(gpu_count=2, cloud=Cloud.COMMUNITY))
    assert instance.cost_per_hr == pytest.approx(0.68)
    assert instance.cloud == "COMMUNITY"


def test_exhausted_balance_refuses_creates(sim: RunPodSimulator, client: RunPodClient) -> None:
    sim.account.set_balance(1.0)
    client.instances.create(create_request())
    with pytest.raises(errors.InsufficientBalanceError):
        client.instances.create(create_request(gpu_type_id=H100))
    sim.account.set_balance(None)
    client.instances.create(create_request(gpu_type_id=H100))


def test_custom_catalog() -> None:
    gpu = {
        "id": "NVIDIA T4",
        "name": "T4",
        "memory": 16,
        "secure": True,
        "community": False,
        "price": {"secure": 0.2, "community": 0.0},
        "maxCount": {"secure": 4, "community": 0},
        "capacity": {"EU-RO-1": 1},
    }
    with RunPodSimulator(API_KEY, gpu_types=[gpu]) as sim:
        client = RunPodClient(API_KEY, sim.base_url)
        (t4,) = client.catalog.gpu_types()
        assert (t4.id, t4.availability, t4.secure_price) == ("NVIDIA T4", Availability.LOW, 0.2)
        client.close()


def test_cluster_stock_is_its_own_and_clusters_draw_on_it(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    """`product=CLUSTER` states Instant Clusters' stock, which differs from pods': the
    contract has no default product for that reason."""
    sim.account.set_capacity(RTX_4090, "US-TX-3", 0, "CLUSTER")
    sim.account.set_capacity(RTX_4090, "EU-RO-1", 0, "CLUSTER")
    sim.account.set_capacity(RTX_4090, "US-KS-2", 2, "CLUSTER")

    def where(product: str) -> dict[str, Availability]:
        gpus = client.catalog.gpu_types(product=product)
        rtx = next(gpu for gpu in gpus if gpu.id == RTX_4090)
        return {stock.id: stock.availability for stock in rtx.datacenters}

    assert where("CLUSTER") == {
        "US-TX-3": Availability.NONE,
        "EU-RO-1": Availability.NONE,
        "US-KS-2": Availability.LOW,
    }
    assert where("POD")["US-TX-3"] is Availability.HIGH
    asked = [r.query.get("product") for r in sim.requests if r.path == "/v2/catalog/gpus"]
    assert asked == ["CLUSTER", "POD"]
    body = {
        "name": "c",
        "type": "TRAINING",
        "compute": {"gpuTypeId": RTX_4090, "gpuCountPerPod": 1, "podCount": 2},
        "image": "img:1",
    }
    made = requests.post(
        f"{sim.base_url}/v2/clusters",
        json=body,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=5,
    )
    assert made.status_code == 201, made.text
    assert made.json()["dataCenterId"] == "US-KS-2"  # the only room for clusters
    assert where("CLUSTER") == {}  # none anywhere: `dataCenters` is omitted
    assert where("POD")["US-KS-2"] is Availability.HIGH  # pods' stock untouched
    again = requests.post(
        f"{sim.base_url}/v2/clusters",
        json=body,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=5,
    )
    assert again.status_code == 400 and "no capacity" in again.json()["detail"]
