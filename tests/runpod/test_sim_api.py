"""The simulator's HTTP surface, spoken to directly: bearer auth, problem+json
errors, create-body validation (422 naming the property, 400 for cross-field rules),
action validation, rate-limit headers and 429 with Retry-After on the simulated
clock, unknown routes and methods, and the /_sim/ admin API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.http import Reply, Request, Router, RouteTable
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, RTX_4090

VALID = {"name": "valid", "image": "img:1", "gpu": {"id": RTX_4090}}


@pytest.fixture
def http(sim: RunPodSimulator) -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {API_KEY}"
        yield session


def _create(sim: RunPodSimulator, http: requests.Session, body: Any) -> requests.Response:
    return http.post(f"{sim.base_url}/v2/pods", json=body, timeout=5)


def test_requests_without_the_key_are_401(sim: RunPodSimulator) -> None:
    answer = requests.get(f"{sim.base_url}/v2/pods", timeout=5)
    assert answer.status_code == 401
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert answer.json() == {
        "title": "Unauthorized",
        "status": 401,
        "detail": "missing or invalid bearer token",
    }
    assert "RateLimit" not in answer.headers


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bogus": 1}, "$: additional properties 'bogus' not allowed"),
        ({"name": None}, "$.name: expected string"),
        ({"gpu": {"id": RTX_4090, "count": 0}}, "$.gpu.count: must be >= 1"),
        (
            {"gpu": {"id": RTX_4090, "colour": "red"}},
            "$.gpu: additional properties 'colour' not allowed",
        ),
        ({"ports": [22]}, "$.ports[0]: expected string"),
        ({"env": {"A": 1}}, "$.env.A: expected string"),
        (
            {"mounts": {"persistent": {"size": 5, "path": "/w"}}},
            "$.mounts.persistent.size: must be >= 10",
        ),
        (
            {"mounts": {"network": [{"path": "/w"}]}},
            "$.mounts.network[0]: missing property 'volumeId'",
        ),
        ({"cloud": "PRIVATE"}, "$.cloud: must be one of SECURE, COMMUNITY"),
        ({"disk": "50"}, "$.disk: expected integer"),
    ],
)
def test_contract_violations_are_422(
    sim: RunPodSimulator, http: requests.Session, change: dict[str, Any], message: str
) -> None:
    answer = _create(sim, http, {**VALID, **change})
    assert answer.status_code == 422
    assert message in answer.json()["errors"]
    assert sim.instances == {}


def test_name_is_required(sim: RunPodSimulator, http: requests.Session) -> None:
    answer = _create(sim, http, {"image": "img", "gpu": {"id": RTX_4090}})
    assert answer.json()["errors"] == ["$: missing property 'name'"]


def test_image_is_required_without_a_template(sim: RunPodSimulator, http: requests.Session) -> None:
    answer = _create(sim, http, {"name": "x", "gpu": {"id": RTX_4090}})
    assert (answer.status_code, answer.json()["errors"]) == (422, ["$: missing property 'image'"])


def test_unknown_template_is_404(sim: RunPodSimulator, http: requests.Session) -> None:
    answer = _create(sim, http, {"name": "x", "templateId": "tpl-x", "gpu": {"id": RTX_4090}})
    assert answer.status_code == 404


def test_unknown_registry_credential_is_404(sim: RunPodSimulator, http: requests.Session) -> None:
    """A credential id is a reference to a resource: "not found or not accessible"."""
    answer = _create(sim, http, {**VALID, "registry": "no-such-credential"})
    assert answer.status_code == 404
    assert "no-such-credential" in answer.json()["detail"]
    assert sim.instances == {}


def test_an_unknown_data_center_is_a_rule_not_capacity(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    """400 like capacity, but deterministic, with a detail that says so."""
    answer = _create(sim, http, {**VALID, "dataCenterIds": ["MARS-1"]})
    assert answer.status_code == 400
    assert answer.json()["detail"] == "dataCenterIds: unknown data center MARS-1"
    assert sim.instances == {}


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"gpu": None}, "exactly one of gpu or cpu"),
        ({"cpu": {"id": "cpu5c", "vcpuCount": 4}}, "exactly one of gpu or cpu"),
        (
            {
                "mounts": {
                    "persistent": {"size": 10, "path": "/a"},
                    "network": [{"volumeId": "v", "path": "/b"}],
                }
            },
            "mutually exclusive",
        ),
        ({"ports": ["80/udp"]}, "80/udp"),
        (
            {"gpu": {"id": RTX_4090, "allowedCudaVersions": ["12.8"], "minCudaVersion": "12.1"}},
            "mutually",
        ),
    ],
)
def test_cross_field_rules_are_400(
    sim: RunPodSimulator, http: requests.Session, change: dict[str, Any], fragment: str
) -> None:
    body = {key: value for key, value in {**VALID, **change}.items() if value is not None}
    answer = _create(sim, http, body)
    assert answer.status_code == 400
    assert fragment in answer.json()["detail"]


def test_malformed_json_is_400(sim: RunPodSimulator, http: requests.Session) -> None:
    answer = http.post(f"{sim.base_url}/v2/pods", data=b"{nope", timeout=5)
    assert answer.status_code == 400


def test_action_body_is_validated(sim: RunPodSimulator, http: requests.Session) -> None:
    instance_id = sim.add_instance("x")
    url = f"{sim.base_url}/v2/pods/{instance_id}/action"
    assert http.post(url, json={"action": "pause"}, timeout=5).status_code == 422
    assert http.post(url, json={"action": "stop", "now": True}, timeout=5).status_code == 422
    assert http.post(url, json={"action": "stop"}, timeout=5).status_code == 200


def test_unknown_routes_and_methods(sim: RunPodSimulator, http: requests.Session) -> None:
    assert http.get(f"{sim.base_url}/v2/nothing", timeout=5).status_code == 404
    answer = http.patch(f"{sim.base_url}/v2/pods", json={}, timeout=5)
    assert answer.status_code == 405 and answer.headers["Allow"] == "GET, POST"
    assert http.delete(f"{sim.base_url}/v2/pods/unknown", timeout=5).status_code == 404


def test_rate_limit_headers_and_429(clock: SimClock) -> None:
    with (
        RunPodSimulator(API_KEY, clock=clock, quota=(2, 100, 1000)) as sim,
        requests.Session() as http,
    ):
        http.headers["Authorization"] = f"Bearer {API_KEY}"
        clock.advance(15)
        first = http.get(f"{sim.base_url}/v2/pods", timeout=5)
        assert (
            first.headers["RateLimit"]
            == '"minute";r=1;t=45, "hour";r=99;t=3585, "day";r=999;t=86385'
        )
        assert (
            first.headers["RateLimit-Policy"]
            == '"minute";q=2;w=60, "hour";q=100;w=3600, "day";q=1000;w=86400'
        )
        http.get(f"{sim.base_url}/v2/pods", timeout=5)
        refused = http.get(f"{sim.base_url}/v2/pods", timeout=5)
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "45"
        assert refused.json()["title"] == "Too Many Requests"
        clock.advance(45)
        assert http.get(f"{sim.base_url}/v2/pods", timeout=5).status_code == 200
        assert http.post(f"{sim.base_url}/_sim/reset", timeout=5).status_code == 204


def _admin(sim: RunPodSimulator, method: str, path: str, body: Any = None) -> requests.Response:
    return requests.request(method, f"{sim.base_url}/_sim{path}", json=body, timeout=5)


def test_admin_api(sim: RunPodSimulator, http: requests.Session) -> None:
    seeded = _admin(
        sim, "POST", "/pods", {"name": "seed", "env": {"RUNPOD_RECONCILER_STOP_ON_EXIT": "1"}}
    )
    pod_id = seeded.json()["id"]
    assert (
        _admin(sim, "POST", "/clock/advance", {"seconds": 30}).json()["now"]
        == "2026-01-01T00:00:30Z"
    )
    assert _admin(sim, "POST", f"/pods/{pod_id}/exit", {"code": 2}).status_code == 204
    assert sim.instances[pod_id]["status"] == "EXITED"
    assert _admin(sim, "POST", "/faults", {"method": "GET", "path": "/v2/pods", "status": 503}).ok
    assert http.get(f"{sim.base_url}/v2/pods", timeout=5).status_code == 503
    assert _admin(sim, "POST", "/faults", {"kind": "create-then-fail", "status": 500}).ok
    assert _create(sim, http, VALID).status_code == 500
    assert _admin(
        sim, "POST", "/capacity", {"gpuTypeId": RTX_4090, "dataCenterId": "US-TX-3", "count": 0}
    ).ok
    assert _admin(sim, "POST", "/balance", {"dollars": 0}).ok
    assert _create(sim, http, VALID).status_code == 402
    assert _admin(sim, "POST", "/balance", {"dollars": None}).ok
    assert _admin(sim, "POST", "/listing-lag", {"seconds": 10}).ok
    assert _admin(sim, "POST", "/image-pull", {"image": "img:1", "seconds": 10}).ok
    assert _admin(sim, "POST", "/templates", {"id": "tpl", "image": "img:2"}).ok
    new_id = _create(sim, http, {"name": "t", "templateId": "tpl", "gpu": {"id": RTX_4090}}).json()[
        "id"
    ]
    failed_create = next(iter(sim.instances.keys() - {pod_id, new_id}))
    listed = [pod["id"] for pod in http.get(f"{sim.base_url}/v2/pods", timeout=5).json()["pods"]]
    assert listed == [pod_id, failed_create]  # the newest is still behind the listing lag
    assert _admin(sim, "POST", f"/pods/{new_id}/stick-runtime-null").ok
    assert _admin(sim, "POST", f"/pods/{new_id}/fail").ok
    assert _admin(sim, "POST", f"/pods/{new_id}/fields", {"cost": "9"}).ok
    state = _admin(sim, "GET", "/state").json()
    by_id = {pod["id"]: pod for pod in state["pods"]}
    assert (by_id[new_id]["status"], by_id[new_id]["cost"], by_id[new_id]["image"]) == (
        "ERROR",
        "9",
        "img:2",
    )
    assert _admin(sim, "DELETE", f"/pods/{new_id}").status_code == 204
    assert _admin(sim, "DELETE", f"/pods/{new_id}").status_code == 404
    logged = _admin(sim, "GET", "/requests").json()
    assert [entry["status"] for entry in logged] == [503, 500, 402, 201, 200]
    assert logged[1]["body"] == VALID
    assert _admin(sim, "POST", "/reset").status_code == 204
    assert sim.instances == {} and sim.requests == []


def test_admin_hang_fault_and_bad_input(sim: RunPodSimulator) -> None:
    assert _admin(sim, "POST", "/faults", {"kind": "create-then-hang", "seconds": 0.01}).ok
    assert _admin(sim, "POST", "/faults", {"kind": "meteor"}).status_code == 400
    assert _admin(sim, "POST", "/clock/advance", {"seconds": -1}).status_code == 400
    assert _admin(sim, "POST", "/pods/nope/exit", {"code": 1}).status_code == 404


def test_the_request_log_names_what_each_create_made_and_when_it_lists(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    """A create that fails after making the pod made it all the same: the log says so,
    with when the pod first shows in the list; a catch-up lists every pod at once."""
    assert _admin(sim, "POST", "/listing-lag", {"seconds": 10}).ok
    assert _admin(sim, "POST", "/faults", {"kind": "create-then-fail", "status": 502}).ok
    assert _create(sim, http, VALID).status_code == 502
    assert _admin(sim, "POST", "/faults", {"method": "POST", "path": "/v2/pods", "status": 500}).ok
    assert _create(sim, http, VALID).status_code == 500
    made, refused = _admin(sim, "GET", "/requests").json()
    assert made["created"] in sim.instances and made["at"] == "2026-01-01T00:00:00Z"
    assert made["listed_from"] == "2026-01-01T00:00:10Z"
    assert refused["created"] is None and refused["listed_from"] is None
    assert http.get(f"{sim.base_url}/v2/pods", timeout=5).json()["pods"] == []
    assert _admin(sim, "POST", "/listing-lag/catch-up").status_code == 204
    listed = http.get(f"{sim.base_url}/v2/pods", timeout=5).json()["pods"]
    assert [pod["id"] for pod in listed] == [made["created"]]


def test_a_route_declared_by_two_resources_is_refused() -> None:
    """Each resource's routes are a table of their own; the same method and path in two
    of them would leave one unreachable, so the simulator refuses to be built so."""
    first, second = RouteTable(), RouteTable()

    class One:
        @first("GET", "/v2/pods/{id}")
        def get(self, request: Request) -> Reply:
            return Reply(200)

    class Two:
        @second("GET", "/v2/pods/{id}")
        def get(self, request: Request) -> Reply:
            return Reply(200)

    with pytest.raises(ValueError, match="routes served twice"):
        Router([(first, One()), (second, Two())])
    router = Router([(first, One())])
    assert router.dispatch("GET", "/v2/pods/abc", {}, None, SimClock().now()).status == 200
