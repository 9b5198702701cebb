"""The simulator's broken answers, as they look on the wire to a plain HTTP client: a list
that repeats entries or shows other tags (while a read by id tells the truth), extra raw
entries, a body trickled on the simulator's clock, a padded body with or without a
Content-Length; and every id the simulator gives is of RunPod's form."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

from reconciler.core.contract import OWNER_ENV
from reconciler.core.domain import is_runpod_id
from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, RTX_4090


@pytest.fixture
def http(sim: RunPodSimulator) -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {API_KEY}"
        yield session


def _pods(sim: RunPodSimulator, http: requests.Session) -> list[dict[str, object]]:
    answer = http.get(f"{sim.base_url}/v2/pods", timeout=5)
    assert answer.status_code == 200
    return list(answer.json()["pods"])


def test_a_list_repeats_its_entries_for_the_faults_count(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    made = sim.add_instance("one")
    sim.faults.repeat_entries("/v2/pods", times=3)
    assert [p["id"] for p in _pods(sim, http)] == [made] * 3
    assert [p["id"] for p in _pods(sim, http)] == [made]


def test_a_list_shows_other_tags_while_the_read_by_id_does_not(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    ours = sim.add_instance("one", env={OWNER_ENV: "me", "KEEP": "1"})
    other = sim.add_instance("two", env={OWNER_ENV: "me"})
    sim.faults.list_env({OWNER_ENV: "someone-else", "KEEP": None}, ids=[ours])
    listed = {p["id"]: p["env"] for p in _pods(sim, http)}
    assert listed == {ours: {OWNER_ENV: "someone-else"}, other: {OWNER_ENV: "me"}}
    by_id = http.get(f"{sim.base_url}/v2/pods/{ours}", timeout=5).json()
    assert by_id["env"] == {OWNER_ENV: "me", "KEEP": "1"}


def test_a_list_shows_extra_raw_entries(sim: RunPodSimulator, http: requests.Session) -> None:
    sim.faults.extra_entries([{"id": "..", "name": "odd"}], count=2)
    assert _pods(sim, http) == [{"id": "..", "name": "odd"}]
    assert _pods(sim, http) == [{"id": "..", "name": "odd"}]
    assert _pods(sim, http) == []


def test_a_trickled_body_moves_the_simulators_clock_a_byte_at_a_time(
    sim: RunPodSimulator, clock: SimClock, http: requests.Session
) -> None:
    sim.add_instance("one")
    sim.faults.trickle("/v2/pods", seconds_per_byte=2.0)
    started = clock.monotonic()
    answer = http.get(f"{sim.base_url}/v2/pods", timeout=5)
    size = len(answer.content)
    assert json.loads(answer.content)["pods"]
    assert clock.monotonic() - started == pytest.approx(2.0 * size)
    assert size - 1 <= sim.faults.wires_sent[-1].sent <= size  # its count may trail the read


@pytest.mark.parametrize("chunked", [False, True])
def test_a_padded_body_is_valid_json_of_that_size(
    sim: RunPodSimulator, http: requests.Session, chunked: bool
) -> None:
    sim.add_instance("one")
    sim.faults.pad(300_000, "/v2/pods", chunked=chunked)
    answer = http.get(f"{sim.base_url}/v2/pods", timeout=5)
    assert len(answer.content) == 300_000
    assert ("Content-Length" in answer.headers) is not chunked
    assert len(answer.json()["pods"]) == 1


def test_every_id_the_simulator_gives_is_of_runpods_form(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    pod = http.post(
        f"{sim.base_url}/v2/pods", json={"name": "p", "image": "i:1", "gpu": {"id": RTX_4090}}
    ).json()["id"]
    registry = http.post(
        f"{sim.base_url}/v2/registries", json={"name": "r", "username": "u", "password": "p"}
    ).json()["id"]
    volume = sim.add_volume("v", 20, "US-TX-3").id
    assert all(is_runpod_id(made) for made in (pod, registry, volume)), (pod, registry, volume)
