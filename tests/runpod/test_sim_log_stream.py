"""The simulated `GET /v2/pods/{id}/logs` stream, read with plain `requests`: backfill by
`tail`, `since` and `Last-Event-ID`, event ids that order and resume, a stream that stays
open while the pod runs and carries lines written later (admin route), that ends when
the pod stops, that a test can cut mid-way without its closing chunk, a slow
backfill (admin route) that sends its events one by one with real gaps between them,
and the answer's Date header from the simulated clock, which tells backfill from live
events."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from itertools import pairwise

import pytest
import requests

from reconciler.core.contract import OWNER_ENV, STOP_ON_EXIT_ENV
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, OWNER

HEADERS = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def pod(sim: RunPodSimulator) -> str:
    env = {OWNER_ENV: OWNER, STOP_ON_EXIT_ENV: "1"}
    instance_id = sim.add_instance("p", env=env)
    sim.logs.write_container(instance_id, ["one", "two", "three"])
    return instance_id


def _events(response: requests.Response) -> Iterator[tuple[str, dict[str, str]]]:
    event_id = ""
    for raw in response.iter_lines():
        line = raw.decode()
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            yield event_id, json.loads(line[6:])


def _open(sim: RunPodSimulator, pod: str, **params: str) -> requests.Response:
    headers = dict(HEADERS)
    if "last_event_id" in params:
        headers["Last-Event-ID"] = params.pop("last_event_id")
    return requests.get(
        f"{sim.base_url}/v2/pods/{pod}/logs", params=params, headers=headers, stream=True, timeout=5
    )


def _take(response: requests.Response, count: int) -> list[tuple[str, dict[str, str]]]:
    events = []
    for event in _events(response):
        events.append(event)
        if len(events) == count:
            break
    return events


def test_tail_backfills_then_live_lines_follow(sim: RunPodSimulator, pod: str) -> None:
    with _open(sim, pod, source="container", tail="2") as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["Cache-Control"] == "no-cache"
        events = _events(response)
        assert [next(events)[1]["line"] for _ in range(2)] == ["two", "three"]
        sim.logs.write_container(pod, ["four"])
        assert next(events)[1]["line"] == "four"
        assert sim.logs.open_streams == 1


def test_the_stream_ends_when_the_pod_stops(sim: RunPodSimulator, pod: str) -> None:
    with _open(sim, pod, source="container", tail="0") as response:
        done: list[list[str]] = []
        reader = threading.Thread(
            target=lambda: done.append([e["line"] for _, e in _events(response)])
        )
        reader.start()
        sim.logs.write_container(pod, ["last words"])
        sim.exit_process(pod, 0)
        reader.join(5)
    assert done == [["last words", "RUNPOD_RECONCILER_EXIT_CODE=0"]]


def test_last_event_id_resumes_just_after_that_event(sim: RunPodSimulator, pod: str) -> None:
    sim.exit_process(pod, 0)  # a finished pod: the stream ends after its backfill
    with _open(sim, pod, source="container", tail="5000") as response:
        events = list(_events(response))
    ids = [event_id for event_id, _ in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    second = ids.index(next(i for i, e in events if e["line"] == "two"))
    with _open(sim, pod, source="container", last_event_id=ids[second], tail="1") as response:
        rest = [e["line"] for _, e in _events(response)]
    assert rest == [e["line"] for _, e in events[second + 1 :]]


def test_since_starts_at_a_moment(sim: RunPodSimulator, pod: str) -> None:
    sim.advance(60)
    sim.logs.write_container(pod, ["later"])
    sim.exit_process(pod, 0)
    with _open(sim, pod, source="container", since="2026-01-01T00:00:30Z") as response:
        assert [e["line"] for _, e in _events(response)] == [
            "later",
            "RUNPOD_RECONCILER_EXIT_CODE=0",
        ]


@pytest.mark.parametrize(
    "params", [{"tail": "5001"}, {"tail": "-1"}, {"source": "stdout"}, {"since": "yesterday"}]
)
def test_bad_parameters_are_refused(sim: RunPodSimulator, pod: str, params: dict[str, str]) -> None:
    with _open(sim, pod, **params) as response:
        assert response.status_code == 422
        assert response.headers["Content-Type"] == "application/problem+json"


def test_an_open_stream_can_be_cut_mid_way(sim: RunPodSimulator, pod: str) -> None:
    with _open(sim, pod, source="container", tail="0") as response:
        assert sim.logs.drop_streams(pod, after=1) == 1
        sim.logs.write_container(pod, ["a", "b"])
        received = []
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            for _, event in _events(response):
                received.append(event["line"])
    assert received == ["a"]


def test_the_next_stream_can_be_cut_during_its_backfill(sim: RunPodSimulator, pod: str) -> None:
    sim.logs.drop_streams(pod, after=2, next_one=True)
    with _open(sim, pod, source="container", tail="3") as response:
        received = []
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            for _, event in _events(response):
                received.append(event["line"])
    assert received == ["one", "two"]


def test_admin_route_appends_lines(sim: RunPodSimulator, pod: str) -> None:
    answer = requests.post(
        f"{sim.base_url}/_sim/pods/{pod}/logs", json={"lines": ["x", "y"]}, timeout=5
    )
    assert answer.status_code == 204
    bad = requests.post(f"{sim.base_url}/_sim/pods/{pod}/logs", json={"lines": "x"}, timeout=5)
    assert bad.status_code == 400
    with _open(sim, pod, source="container", tail="2") as response:
        assert [e["line"] for _, e in _take(response, 2)] == ["x", "y"]


def test_the_date_header_tells_backfill_from_live_lines(sim: RunPodSimulator, pod: str) -> None:
    """The stream gives no end-of-backfill mark, but event ids are timestamps and the
    answer's Date is when the request was served, by the same (simulated) clock."""
    sim.advance(0.5)
    with _open(sim, pod, source="container", tail="3") as response:
        served = parsedate_to_datetime(response.headers["Date"])
        assert served == sim.clock.now().replace(microsecond=0)
        events = _events(response)
        backfill = [next(events)[1] for _ in range(3)]
        sim.advance(2)
        sim.logs.write_container(pod, ["live"])
        live = next(events)[1]
    assert all(_stamp(e) < served + timedelta(seconds=1) for e in backfill)
    assert live["line"] == "live" and _stamp(live) >= served + timedelta(seconds=1)


def _stamp(event: dict[str, str]) -> datetime:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))


def test_a_slow_backfill_sends_its_events_apart_then_live_lines_at_once(
    sim: RunPodSimulator, pod: str
) -> None:
    answer = requests.post(
        f"{sim.base_url}/_sim/pods/{pod}/logs/slow", json={"seconds": 0.3}, timeout=5
    )
    assert answer.status_code == 204
    arrivals: list[tuple[str, float]] = []
    with _open(sim, pod, source="container", tail="3") as response:
        opened = time.monotonic()
        events = _events(response)
        for _ in range(3):
            arrivals.append((next(events)[1]["line"], time.monotonic() - opened))
        sim.logs.write_container(pod, ["live"])
        line = next(events)[1]["line"]
        live_after = time.monotonic() - opened - arrivals[-1][1]
    assert [line for line, _ in arrivals] == ["one", "two", "three"] and line == "live"
    moments = [0.0] + [at for _, at in arrivals]
    assert all(later - earlier >= 0.25 for earlier, later in pairwise(moments))
    assert live_after < 0.25  # only the backfill is slow
    bad = requests.post(
        f"{sim.base_url}/_sim/pods/{pod}/logs/slow", json={"seconds": -1}, timeout=5
    )
    assert bad.status_code == 400
