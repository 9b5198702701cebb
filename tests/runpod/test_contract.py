"""Contract checks against a JSON-schema subset of RunPod v2 (contract.py): every
request body the client sends, every pod the simulator serves in each status, the
pod list, the GPU catalog with and without availability, registries and every kind
of error answer; plus proof that the schemas do reject what the contract forbids."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import jsonschema
import pytest
import requests

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.contract import STOP_ON_EXIT_ENV
from reconciler.core.domain import Cloud, NetworkVolume, PersistentVolume
from reconciler.sim.runpod.simulator import RunPodSimulator

from . import contract
from .helpers import API_KEY, RTX_4090, create_request, pod_action


@pytest.fixture
def http(sim: RunPodSimulator) -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {API_KEY}"
        yield session


def _every_kind_of_call(sim: RunPodSimulator, client: RunPodClient) -> None:
    registry = client.registries.create("hub", "robot", "pw")
    sim.account.add_template("tpl", image="base:1")
    client.instances.create(create_request())
    client.instances.create(
        create_request(
            cloud=Cloud.COMMUNITY,
            gpu_count=2,
            args="run --fast",
            container_disk_gb=30,
            datacenter_ids=("EU-RO-1",),
            persistent_volume=PersistentVolume(20, "/workspace"),
            registry_auth_id=registry.id,
        )
    )
    client.instances.create(create_request(image="", template_id="tpl"))
    batch = client.instances.create(
        create_request(
            env={STOP_ON_EXIT_ENV: "1"},
            network_volume=NetworkVolume(sim.add_volume("v", 10, "US-TX-3").id, "/v"),
        )
    )
    sim.advance(15)
    for action in ("restart", "stop", "terminate"):
        pod_action(sim, batch.id, action)
    client.catalog.gpu_types(gpu_count=2, cloud=Cloud.COMMUNITY)
    client.instances.read_ended_log(next(iter(sim.instances)))
    client.instances.update_env(next(iter(sim.instances)), {"A": "1"})
    client.registries.delete(client.registries.create("spare", "robot", "pw").id)
    client.billing.instances(sim.clock.now() - timedelta(days=2), sim.clock.now())


def _schema_for(method: str, path: str) -> dict[str, Any] | None:
    for (schema_method, pattern), schema in contract.REQUEST_SCHEMAS.items():
        if method == schema_method and fnmatch.fnmatchcase(path, pattern):
            return schema
    return None


def test_every_request_body_the_client_sends(sim: RunPodSimulator, client: RunPodClient) -> None:
    _every_kind_of_call(sim, client)
    checked = 0
    for request in sim.requests:
        schema = _schema_for(request.method, request.path)
        if schema is None:
            assert request.body is None, request
            continue
        contract.validate(schema, request.body)
        checked += 1
    assert checked == 10


def test_pods_in_every_status(sim: RunPodSimulator, client: RunPodClient) -> None:
    ids = [client.instances.create(create_request(name=f"p{index}")).id for index in range(5)]
    sim.advance(6)  # STARTING
    sim.stick_runtime_null(ids[1])
    sim.advance(10)  # RUNNING
    pod_action(sim, ids[2], "stop")
    sim.fail_instance(ids[3])
    sim.add_foreign_instance()
    statuses = {pod["status"] for pod in sim.instances.values()}
    assert statuses == {"RUNNING", "EXITED", "ERROR"}
    sim.add_instance("fresh", running=False)
    for pod in sim.instances.values():
        contract.validate(contract.POD, pod)


def test_list_and_single_pod_answers(sim: RunPodSimulator, http: requests.Session) -> None:
    instance_id = sim.add_instance("listed", ports=["22/tcp", "8888/http"])
    contract.validate(contract.LIST_PODS, http.get(f"{sim.base_url}/v2/pods", timeout=5).json())
    one = http.get(f"{sim.base_url}/v2/pods/{instance_id}", timeout=5).json()
    contract.validate(contract.POD, one)


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"include": "AVAILABILITY", "product": "POD"},
        {"include": "AVAILABILITY", "product": "POD", "count": "8"},
    ],
)
def test_gpu_catalog_answers(
    sim: RunPodSimulator, http: requests.Session, query: dict[str, str]
) -> None:
    answer = http.get(f"{sim.base_url}/v2/catalog/gpus", params=query, timeout=5).json()
    contract.validate(contract.LIST_GPU_TYPES, answer)
    assert ("availability" in answer["gpus"][0]) is bool(query)


def test_registry_answers(sim: RunPodSimulator, http: requests.Session) -> None:
    body = {"name": "hub", "username": "u", "password": "p"}
    created = http.post(f"{sim.base_url}/v2/registries", json=body, timeout=5).json()
    contract.validate(contract.REGISTRY, created)
    assert "password" not in created and "username" not in created
    listed = http.get(f"{sim.base_url}/v2/registries", timeout=5).json()
    assert listed == {"registries": [created]}


def test_every_error_answer(
    sim: RunPodSimulator, client: RunPodClient, http: requests.Session
) -> None:
    sim.account.set_balance(0)
    sim.faults.inject("GET", "/v2/registries", 429)
    answers = [
        requests.get(f"{sim.base_url}/v2/pods", timeout=5),
        http.post(
            f"{sim.base_url}/v2/pods",
            json={"name": "x", "image": "i", "gpu": {"id": "?"}},
            timeout=5,
        ),
        http.post(
            f"{sim.base_url}/v2/pods",
            json={"name": "x", "image": "i", "gpu": {"id": RTX_4090}},
            timeout=5,
        ),
        http.get(f"{sim.base_url}/v2/pods/none", timeout=5),
        http.post(f"{sim.base_url}/v2/pods", json={"name": 1}, timeout=5),
        http.get(f"{sim.base_url}/v2/registries", timeout=5),
        http.put(f"{sim.base_url}/v2/pods", timeout=5),
    ]
    assert [answer.status_code for answer in answers] == [401, 400, 402, 404, 422, 429, 405]
    for answer in answers:
        assert answer.headers["Content-Type"] == "application/problem+json"
        contract.validate(contract.ERROR_RESPONSE, answer.json())
    refused = http.post(
        f"{sim.base_url}/v2/pods/{sim.add_instance('r')}/action",
        json={"action": "start"},
        timeout=5,
    )
    assert refused.status_code == 409
    assert refused.headers["Content-Type"] == "application/problem+json"
    contract.validate(contract.ERROR_RESPONSE, refused.json())


def test_the_schemas_reject_what_the_contract_forbids(sim: RunPodSimulator) -> None:
    instance_id = sim.add_instance("x")
    pod = sim.instances[instance_id]
    broken = [
        (contract.CREATE_POD_REQUEST, {"name": "no image", "gpu": {"id": RTX_4090}}),
        (contract.CREATE_POD_REQUEST, {"name": "x", "image": "i", "gpuId": RTX_4090}),
        (contract.POD, {key: value for key, value in pod.items() if key != "cost"}),
        (contract.POD, {**pod, "status": "SLEEPING"}),
        (contract.ERROR_RESPONSE, {"title": "x", "status": 400}),
    ]
    for schema, document in broken:
        with pytest.raises(jsonschema.ValidationError):
            contract.validate(schema, document)
