"""CPU pods in the simulated RunPod, through the real client and raw HTTP: the CPU catalog
(flavors, vCPU ranges, RAM and price per vCPU, availability only on request), creates
checked as the contract says (a power-of-two vCPU count within the flavor's range, a
known flavor, not both gpu and cpu, no persistent mount), the created pod's `cpu` block
with the RAM RunPod derives, the exact CPU create body the client sends, capacity in
vCPUs, billing as CPU, and utilization set per pod through the fields route showing in
the live runtime only."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.domain import Availability, InstanceStatus
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, OWNER, create_request


def _cpu_request(flavor: str = "cpu3c", vcpus: int = 4, **overrides: Any) -> Any:
    return create_request(
        gpu_type_id="", gpu_count=0, cpu_flavor_id=flavor, vcpu_count=vcpus, **overrides
    )


def _post(sim: RunPodSimulator, body: dict[str, Any]) -> requests.Response:
    return requests.post(
        f"{sim.base_url}/v2/pods",
        json=body,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=5,
    )


def test_cpu_catalog_lists_flavors(sim: RunPodSimulator, client: RunPodClient) -> None:
    flavors = {f.id: f for f in client.catalog.cpu_flavors()}
    cpu3c = flavors["cpu3c"]
    assert (cpu3c.vcpu_min, cpu3c.vcpu_max, cpu3c.ram_gb_per_vcpu, cpu3c.price_per_vcpu) == (
        2,
        32,
        2,
        0.03,
    )
    assert cpu3c.availability is Availability.HIGH
    assert {dc.id for dc in cpu3c.datacenters} == {"US-TX-3", "EU-RO-1", "US-KS-2"}
    assert sim.requests[-1].query == {"include": "AVAILABILITY", "product": "POD"}


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({}, 200),
        ({"include": "AVAILABILITY"}, 400),
        ({"product": "POD"}, 400),
        ({"vcpuCount": "4"}, 400),
        ({"include": "PRICES", "product": "POD"}, 422),
        ({"include": "AVAILABILITY", "product": "CLUSTER"}, 422),
    ],
)
def test_cpu_catalog_query_rules(sim: RunPodSimulator, query: dict[str, str], status: int) -> None:
    answer = requests.get(
        f"{sim.base_url}/v2/catalog/cpus",
        params=query,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=5,
    )
    assert answer.status_code == status
    if status == 200:
        assert all("availability" not in entry for entry in answer.json()["cpus"])


def test_cpu_create_body_and_pod(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance = client.instances.create(_cpu_request(datacenter_ids=("US-TX-3",)))
    body = sim.requests[-1].body
    assert body["cpu"] == {"id": "cpu3c", "vcpuCount": 4} and "gpu" not in body
    served = sim.instances[instance.id]
    assert served["cpu"] == {"id": "cpu3c", "vcpuCount": 4, "memory": 8}
    assert "gpu" not in served and served["cudaVersion"] is None
    assert (instance.cpu_flavor_id, instance.vcpu_count, instance.memory_gb) == ("cpu3c", 4, 8)
    assert instance.gpu_type_id is None and instance.cost_per_hr == pytest.approx(0.12)
    assert served["env"]["RUNPOD_RECONCILER_OWNER"] == OWNER


@pytest.mark.parametrize(
    ("cpu", "extra", "detail"),
    [
        ({"id": "cpu3c", "vcpuCount": 6}, {}, "power of two"),
        ({"id": "cpu3c", "vcpuCount": 64}, {}, "from 2 to 32"),
        ({"id": "cpu9x", "vcpuCount": 4}, {}, "unknown CPU flavor"),
        ({"id": "cpu3c", "vcpuCount": 4}, {"gpu": {"id": "NVIDIA RTX A6000"}}, "exactly one"),
        (
            {"id": "cpu3c", "vcpuCount": 4},
            {"mounts": {"persistent": {"size": 20, "path": "/workspace"}}},
            "persistent",
        ),
        ({"id": "cpu3c", "vcpuCount": 4}, {"cloud": "COMMUNITY"}, "COMMUNITY"),
    ],
)
def test_cpu_create_rules(
    sim: RunPodSimulator, cpu: dict[str, Any], extra: dict[str, Any], detail: str
) -> None:
    answer = _post(sim, {"name": "n", "image": "busybox", "cpu": cpu, **extra})
    assert answer.status_code == 400, answer.text
    assert detail in answer.json()["detail"]
    assert sim.instances == {}


@pytest.mark.parametrize(
    "cpu",
    [{"id": "cpu3c"}, {"id": "cpu3c", "vcpuCount": 1}, {"id": "cpu3c", "vcpuCount": 4, "count": 1}],
)
def test_cpu_create_schema(sim: RunPodSimulator, cpu: dict[str, Any]) -> None:
    assert _post(sim, {"name": "n", "image": "busybox", "cpu": cpu}).status_code == 422


def test_cpu_capacity_is_in_vcpus(sim: RunPodSimulator, client: RunPodClient) -> None:
    # EU-RO-1 has 128 free vCPUs of cpu3c: four pods of 32 fill it.
    for _ in range(4):
        client.instances.create(_cpu_request(vcpus=32, datacenter_ids=("EU-RO-1",)))
    with pytest.raises(errors.RejectedError):
        client.instances.create(_cpu_request(vcpus=32, datacenter_ids=("EU-RO-1",)))


def test_utilization_is_set_through_the_fields_route(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    instance = client.instances.create(_cpu_request())
    answer = requests.post(
        f"{sim.base_url}/_sim/pods/{instance.id}/fields",
        json={"runtime": {"cpu": {"util": 50}, "memory": {"util": 25}}},
        timeout=5,
    )
    assert answer.ok
    assert client.instances.get(instance.id).runtime is None  # not running yet: null
    sim.advance(60)
    running = client.instances.get(instance.id)
    assert running.status is InstanceStatus.RUNNING and running.runtime is not None
    assert (running.runtime.cpu_percent, running.runtime.memory_percent) == (50, 25)
    assert running.runtime.uptime_seconds > 0  # the live runtime is kept underneath


def test_gpu_pods_report_per_gpu_utilization(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance = client.instances.create(create_request(gpu_count=2))
    sim.set_instance_fields(instance.id, {"runtime": {"gpus": [{"util": 90}, {"util": 30}]}})
    sim.advance(60)
    runtime = client.instances.get(instance.id).runtime
    assert runtime is not None and runtime.gpu_percents == (90, 30)


def test_a_cpu_pod_is_billed_as_cpu(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance = client.instances.create(_cpu_request())
    sim.advance(3600)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    params = {"lastN": "1", "bucketSize": "day"}
    pods = requests.get(
        f"{sim.base_url}/v2/billing/pods", params=params, headers=headers, timeout=5
    )
    [record] = pods.json()["records"]
    assert record["podId"] == instance.id and record["gpuAmount"] == 0.0
    assert record["cpuAmount"] > 0
    assert record["totalAmount"] == pytest.approx(record["cpuAmount"] + record["diskAmount"])
    account = requests.get(f"{sim.base_url}/v2/billing", params=params, headers=headers, timeout=5)
    totals = account.json()["metadata"]["totals"]
    assert totals["podCpuAmount"] == pytest.approx(record["cpuAmount"])
    assert totals["podGpuAmount"] == 0.0
