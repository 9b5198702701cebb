"""RunPod's system lines (image pull, start-up, errors) as Events on the pod while its
instance starts, through both simulators: the Deployment's background stream per
starting pod (one request, let go once the pod runs), `sync --once`'s read per starting
pod per run, nothing read early while the quota is not ample, and no line ever counted
twice: not by a second read, not by another process, not when the instance ends and
its last lines are read again. RunPod requests are counted."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reconciler.demo.sandbox import Sandbox

IMAGE = "ghcr.io/acme/big-model:1"
PULLING = f"pulling image {IMAGE}"


def eventually(check: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def system_events(box: Sandbox, name: str = "train") -> dict[str, int]:
    """Message -> count of the pod's RunPodSystem Events."""
    return {
        e["message"]: int(e.get("count") or 1)
        for e in box.events(name)
        if e["reason"] == "RunPodSystem"
    }


def log_requests(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if r.path.endswith("/logs"))


def pod_phase(box: Sandbox, name: str = "train") -> str:
    return str(((box.pod(name) or {}).get("status") or {}).get("phase"))


def starting_pod(box: Sandbox) -> str:
    """A pod whose instance was created and is being provisioned; its instance id."""
    box.runpod_sim.account.set_image_pull_seconds(IMAGE, 300)
    box.add_pod("train", image=IMAGE, command=["python", "train.py"])
    box.tick()
    instance: dict[str, Any] = box.instance_for(box.pod("train") or {}) or {}
    assert instance.get("status") == "PROVISIONING"
    return str(instance["id"])


@pytest.fixture
def streaming() -> Iterator[Sandbox]:
    with Sandbox(startup_lines="stream") as box:
        yield box


@pytest.fixture
def reading() -> Iterator[Sandbox]:
    with Sandbox(startup_lines="read") as box:
        yield box


def test_the_deployment_streams_start_up_lines_while_the_pod_is_pending(
    streaming: Sandbox,
) -> None:
    box = streaming
    instance_id = starting_pod(box)
    before = log_requests(box)
    box.advance(6)  # provisioned: the image pull begins
    box.tick()
    startup = box.engine.hooks.startup
    assert startup is not None and startup.open_streams == 1
    eventually(lambda: PULLING in system_events(box))
    box.runpod_sim.logs.write_system(instance_id, ["layer 2/3 downloaded"])
    eventually(lambda: "layer 2/3 downloaded" in system_events(box))
    assert pod_phase(box) == "Pending"  # live, while the image is still pulled
    box.advance(30)
    box.tick()  # a later tick keeps the one stream: no request more
    assert log_requests(box) - before == 1
    box.advance(300)  # the container runs: the stream is let go
    box.tick()
    assert pod_phase(box) == "Running" and startup.open_streams == 0
    # The instance ends: its last lines are read once more, and not counted again.
    box.runpod_sim.logs.write_system(instance_id, ["container exited with code 1"])
    box.runpod_sim.fail_instance(instance_id)
    box.tick()
    box.advance(30)
    box.tick()
    assert system_events(box) == {
        PULLING: 1,
        "layer 2/3 downloaded": 1,
        "container exited with code 1": 1,
    }


def test_sync_once_reads_starting_pods_once_per_run_and_counts_each_line_once(
    reading: Sandbox,
) -> None:
    box = reading
    instance_id = starting_pod(box)
    before = log_requests(box)
    box.advance(6)
    box.tick()
    assert system_events(box) == {PULLING: 1}
    assert log_requests(box) - before == 1  # one read for the one starting pod
    box.runpod_sim.logs.write_system(instance_id, ["layer 1/3 downloaded"])
    box.advance(60)
    box.restart()  # the next CronJob run: a new process, with no memory of the last
    box.tick()
    assert system_events(box) == {PULLING: 1, "layer 1/3 downloaded": 1}
    assert log_requests(box) - before == 2
    box.advance(300)
    box.tick()  # running: nothing more to read while it starts
    assert pod_phase(box) == "Running"
    assert log_requests(box) - before == 2


def test_the_same_text_again_later_is_counted_as_a_real_recorder_counts(
    reading: Sandbox,
) -> None:
    box = reading
    instance_id = starting_pod(box)
    box.advance(6)
    box.runpod_sim.logs.write_system(instance_id, ["retrying the registry"])
    box.tick()
    box.advance(5)
    box.runpod_sim.logs.write_system(instance_id, ["retrying the registry"])
    box.restart()
    box.tick()
    box.tick()
    assert system_events(box)["retrying the registry"] == 2


def test_nothing_is_read_early_while_the_quota_is_not_ample() -> None:
    with Sandbox(startup_lines="stream", runpod_options={"quota": (8, 3000, 50000)}) as box:
        instance_id = starting_pod(box)
        box.advance(6)
        box.tick()
        startup = box.engine.hooks.startup
        assert startup is not None and startup.open_streams == 0
        assert log_requests(box) == 0
        # The lines are not lost: they show when the instance ends.
        box.runpod_sim.fail_instance(instance_id)
        box.advance(60)
        box.tick()
        box.advance(30)
        box.tick()
        assert PULLING in system_events(box)


# A quota no start-up read can make less than ample, so that only the caps limit them.
AMPLE = {"quota": (10_000, 100_000, 1_000_000)}


def starting_pods(box: Sandbox, count: int) -> None:
    """`count` pods whose instances are provisioned and pull their image."""
    box.runpod_sim.account.set_image_pull_seconds(IMAGE, 300)
    for n in range(count):
        box.add_pod(f"train-{n}", image=IMAGE, command=["python", "train.py"])
    box.tick()
    box.advance(6)


def test_the_deployment_holds_at_most_16_streams_at_once() -> None:
    with Sandbox(startup_lines="stream", runpod_options=AMPLE) as box:
        starting_pods(box, 18)
        box.tick()
        startup = box.engine.hooks.startup
        assert startup is not None and startup.open_streams == 16
        eventually(lambda: log_requests(box) == 16)


def test_sync_once_reads_at_most_4_starting_pods_per_run() -> None:
    with Sandbox(startup_lines="read", runpod_options=AMPLE) as box:
        starting_pods(box, 6)
        before = log_requests(box)
        box.tick()
        assert log_requests(box) - before == 4
        shown = [n for n in range(6) if PULLING in system_events(box, f"train-{n}")]
        assert len(shown) == 4
