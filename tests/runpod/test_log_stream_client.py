"""Reading a pod's log through the real client and `read_log`: backfill by tail and
since, a read without follow ending at the end of the backfill (its tail, the first
live event by the stream's Date, silence only for a quiet pod), following live lines,
resuming after a cut stream by the last event id with no line lost or repeated, giving
up after repeated breaks, and what each costs in RunPod requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.logstream import LogRead, LogStreamBroken, read_log
from reconciler.core.contract import OWNER_ENV, STOP_ON_EXIT_ENV
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import OWNER


@pytest.fixture
def pod(sim: RunPodSimulator) -> str:
    instance_id = sim.add_instance("p", env={OWNER_ENV: OWNER, STOP_ON_EXIT_ENV: "1"})
    sim.logs.write_container(instance_id, [f"line {n}" for n in range(1, 6)])
    return instance_id


def _lines(
    client: RunPodClient, pod: str, read: LogRead, max_resumes: int = 5, idle: float = 0.3
) -> Iterator[str]:
    events = read_log(
        client.instances.log_events,
        pod,
        read,
        backfill_idle_seconds=idle,
        follow_idle_seconds=5,
        sleep=lambda _: None,
        max_resumes=max_resumes,
    )
    return (event.line for event in events)


def _read(client: RunPodClient, pod: str, read: LogRead, max_resumes: int = 5) -> list[str]:
    return list(_lines(client, pod, read, max_resumes))


def _log_requests(sim: RunPodSimulator) -> int:
    return sum(1 for r in sim.requests if r.path.endswith("/logs"))


def test_a_tail_ends_the_backfill_without_waiting_for_silence(
    sim: RunPodSimulator, client: RunPodClient, pod: str
) -> None:
    assert list(_lines(client, pod, LogRead(tail=2), idle=600)) == ["line 4", "line 5"]
    assert _log_requests(sim) == 1


def test_a_read_ends_before_the_first_live_line(
    sim: RunPodSimulator, client: RunPodClient, pod: str
) -> None:
    """A chatty pod never falls silent: the read ends at the first line stamped after
    the stream's Date, without it, and without waiting for any silence."""
    received: list[str] = []
    backfilled = threading.Event()

    def read() -> None:
        for line in _lines(client, pod, LogRead(), idle=600):
            received.append(line)
            if len(received) == 5:
                backfilled.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert backfilled.wait(5)
    sim.advance(2)
    sim.logs.write_container(pod, ["printed after the request began", "and more"])
    reader.join(5)
    assert not reader.is_alive()
    assert received == [f"line {n}" for n in range(1, 6)]
    assert _log_requests(sim) == 1


def test_a_quiet_pod_ends_the_backfill_by_silence(
    sim: RunPodSimulator, client: RunPodClient, pod: str
) -> None:
    assert _read(client, pod, LogRead()) == [f"line {n}" for n in range(1, 6)]
    assert _log_requests(sim) == 1


def test_since_reads_from_a_moment(sim: RunPodSimulator, client: RunPodClient, pod: str) -> None:
    sim.advance(60)
    sim.logs.write_container(pod, ["later"])
    since = sim.clock.now() - timedelta(seconds=1)
    assert _read(client, pod, LogRead(since=since)) == ["later"]


def test_a_cut_backfill_resumes_without_loss_or_repeat(
    sim: RunPodSimulator, client: RunPodClient, pod: str
) -> None:
    sim.logs.drop_streams(pod, after=2, next_one=True)
    assert _read(client, pod, LogRead(tail=5)) == [f"line {n}" for n in range(1, 6)]
    assert _log_requests(sim) == 2  # one more request per resume


def test_follow_carries_live_lines_across_a_cut_until_the_pod_stops(
    sim: RunPodSimulator, client: RunPodClient, pod: str
) -> None:
    received: list[str] = []
    two_seen = threading.Event()

    def follow() -> None:
        for line in _lines(client, pod, LogRead(tail=2, follow=True)):
            received.append(line)
            if len(received) == 2:
                two_seen.set()

    reader = threading.Thread(target=follow)
    reader.start()
    assert two_seen.wait(5)
    assert sim.logs.drop_streams(pod, after=1) == 1
    sim.logs.write_container(pod, ["six", "seven", "eight"])
    sim.exit_process(pod, 0)
    reader.join(10)
    assert not reader.is_alive()
    assert received == [
        "line 4",
        "line 5",
        "six",
        "seven",
        "eight",
        "RUNPOD_RECONCILER_EXIT_CODE=0",
    ]
    assert _log_requests(sim) == 2


def test_repeated_breaks_give_up(sim: RunPodSimulator, client: RunPodClient, pod: str) -> None:
    for _ in range(3):
        sim.logs.drop_streams(pod, after=0, next_one=True)
        with pytest.raises(LogStreamBroken):
            _read(client, pod, LogRead(tail=1), max_resumes=0)
