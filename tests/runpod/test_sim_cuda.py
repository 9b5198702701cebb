"""The simulator's hosts and their CUDA versions, as RunPod's contract has them: the GPU
catalog lists each type's versions (`cudaVersions`, only with include=AVAILABILITY), a
create's `gpu.allowedCudaVersions` (exact) or `gpu.minCudaVersion` (numeric) picks the
host, a constraint no host meets is a capacity error (400), and an image whose CUDA
requirement is above its host's driver never starts: nvidia-container-cli's requirement
error in the system log, the pod STARTING and billing for good. A client that sends no
constraint (the sloppy one) lands such an image on an old host."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, RTX_4090

IMAGE = "pytorch/pytorch:2.5.1-cuda12.6-cudnn9-runtime"


@pytest.fixture
def http(sim: RunPodSimulator) -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {API_KEY}"
        yield session


@pytest.fixture
def hosts(sim: RunPodSimulator) -> RunPodSimulator:
    """RTX 4090 hosts: 12.2 in US-TX-3 (the most free), 12.6 in EU-RO-1, 12.8 in US-KS-2."""
    for datacenter, version in (("US-TX-3", "12.2"), ("EU-RO-1", "12.6"), ("US-KS-2", "12.8")):
        sim.account.set_host_cuda(RTX_4090, datacenter, version)
    sim.account.set_image_cuda(IMAGE, "12.6")
    return sim


def _create(sim: RunPodSimulator, http: requests.Session, **gpu: Any) -> requests.Response:
    body = {"name": "p", "image": IMAGE, "gpu": {"id": RTX_4090, **gpu}}
    return http.post(f"{sim.base_url}/v2/pods", json=body, timeout=5)


def _gpus(sim: RunPodSimulator, http: requests.Session, **params: str) -> dict[str, Any]:
    answer = http.get(f"{sim.base_url}/v2/catalog/gpus", params=params, timeout=5)
    assert answer.status_code == 200
    return {gpu["id"]: gpu for gpu in answer.json()["gpus"]}


def test_the_catalog_lists_each_types_host_versions_newest_first(
    hosts: RunPodSimulator, http: requests.Session
) -> None:
    hosts.account.set_capacity(RTX_4090, "EU-RO-1", 0)
    gpus = _gpus(hosts, http, include="AVAILABILITY", product="POD")
    assert gpus[RTX_4090]["cudaVersions"] == [
        {"version": "12.8", "available": True},
        {"version": "12.6", "available": False},
        {"version": "12.2", "available": True},
    ]
    assert "cudaVersions" not in _gpus(hosts, http)[RTX_4090]


def test_allowed_versions_pick_a_host_of_one_of_them(
    hosts: RunPodSimulator, http: requests.Session
) -> None:
    answer = _create(hosts, http, allowedCudaVersions=["12.6", "12.8"])
    assert answer.status_code == 201
    assert answer.json()["cudaVersion"] == "12.6"  # of those, the data center most free
    assert answer.json()["dataCenterId"] == "EU-RO-1"


def test_a_floor_compares_versions_as_numbers(
    hosts: RunPodSimulator, http: requests.Session
) -> None:
    hosts.account.set_host_cuda(RTX_4090, "EU-RO-1", "12.10")
    answer = _create(hosts, http, minCudaVersion="12.9")
    assert answer.status_code == 201
    assert answer.json()["cudaVersion"] == "12.10"


@pytest.mark.parametrize(
    "constraint", [{"allowedCudaVersions": ["12.4"]}, {"minCudaVersion": "13.0"}]
)
def test_a_constraint_no_host_meets_is_a_capacity_error(
    hosts: RunPodSimulator, http: requests.Session, constraint: dict[str, Any]
) -> None:
    answer = _create(hosts, http, **constraint)
    assert answer.status_code == 400
    assert "no capacity" in answer.json()["detail"]
    assert hosts.instances == {}


def test_an_image_above_its_hosts_cuda_never_starts_and_bills_on(
    hosts: RunPodSimulator, http: requests.Session
) -> None:
    answer = _create(hosts, http)  # no constraint: the host with the most free, CUDA 12.2
    assert answer.status_code == 201
    pod_id = answer.json()["id"]
    hosts.advance(3600)
    served = http.get(f"{hosts.base_url}/v2/pods/{pod_id}", timeout=5).json()
    assert (served["status"], served["runtime"], served["startedAt"]) == ("STARTING", None, None)
    assert served["cudaVersion"] == "12.2"
    assert served["ssh"]["direct"] is None
    lines = [line.line for line in hosts.account.pods[pod_id].visible_log(hosts.clock.now(), None)]
    assert (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.6, please "
        "update your driver to a newer version, or use an earlier cuda container: unknown"
    ) in lines
    assert "container started" not in lines
    assert hosts.billed(pod_id)["gpu"] == pytest.approx(0.69)  # an hour of the GPU


def test_the_same_image_runs_on_a_host_that_meets_it(
    hosts: RunPodSimulator, http: requests.Session
) -> None:
    answer = _create(hosts, http, allowedCudaVersions=["12.6", "12.8"])
    hosts.advance(60)
    served = http.get(f"{hosts.base_url}/v2/pods/{answer.json()['id']}", timeout=5).json()
    assert served["status"] == "RUNNING"
    assert served["runtime"] is not None


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"minCudaVersion": "12.6"}, 400),  # without include=AVAILABILITY
        (
            {
                "include": "AVAILABILITY",
                "product": "POD",
                "cudaVersions": "12.8",
                "minCudaVersion": "12",
            },
            400,
        ),
        ({"include": "AVAILABILITY", "product": "POD", "cudaVersions": "12"}, 422),
        ({"include": "AVAILABILITY", "product": "POD", "minCudaVersion": "twelve"}, 422),
    ],
)
def test_the_catalogs_cuda_filters_follow_the_contract(
    hosts: RunPodSimulator, http: requests.Session, params: dict[str, str], status: int
) -> None:
    answer = http.get(f"{hosts.base_url}/v2/catalog/gpus", params=params, timeout=5)
    assert answer.status_code == status


def test_a_cuda_floor_scopes_the_catalogs_stock_and_versions(
    hosts: RunPodSimulator, http: requests.Session
) -> None:
    available = {"include": "AVAILABILITY", "product": "POD"}
    gpu = _gpus(hosts, http, **available, minCudaVersion="12.6")[RTX_4090]
    assert [v["version"] for v in gpu["cudaVersions"]] == ["12.8", "12.6"]
    stock = {dc["id"]: dc["availability"] for dc in gpu["dataCenters"]}
    assert stock["US-TX-3"] == "NONE"  # its hosts report 12.2
    exact = _gpus(hosts, http, **available, cudaVersions="12.2")[RTX_4090]
    assert [v["version"] for v in exact["cudaVersions"]] == ["12.2"]
    assert _gpus(hosts, http, **available, minCudaVersion="13")[RTX_4090]["availability"] == "NONE"
