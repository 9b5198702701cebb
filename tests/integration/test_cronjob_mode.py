"""CronJob mode under the modelled control plane: the node lifecycle controller (Unknown
after the grace period, unreachable taints, eviction after the 300 s toleration), a
managed cloud's node controller deleting a NotReady node it does not know, and pod
garbage collection. Runs start a minute apart (plus a start-up delay, as a Job's pod
takes to schedule and start), each one a fresh process: one tick, then `--stay`.

With `--stay 40` every instance survives 20 simulated minutes and the node never leaves
Ready. Without it the node goes NotReady between runs, and one missed run (a CronJob
with concurrencyPolicy Forbid skips a run while the previous one is still going) lets
the cloud node controller and pod GC take every pod and so every instance.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.process.cronjob_run import stay_beating
from reconciler.sim.kube.controllers import ControllerSettings
from tests.integration.conftest import FAST

NODE = "virtual-runpod"
PODS = ("train-a", "train-b", "serve")
START_UP_SECONDS = 10
# deploy/cronjob's --stay: start-up plus stay ends before the next schedule, or a
# CronJob with concurrencyPolicy Forbid would skip it.
STAY = 40


@pytest.fixture
def box() -> Iterator[Sandbox]:
    controllers = ControllerSettings(cloud_node_lifecycle=True)
    with Sandbox(FAST.with_values(max_pending_time=900), controllers=controllers) as sandbox:
        yield sandbox


class NodeWatcher:
    """Samples the node every 5 simulated seconds, as an observer would."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.states: list[str] = []
        box.clock.every(5, self.sample)

    def sample(self) -> None:
        node = self.box.kube_sim.get("nodes", None, NODE)
        if node is None:
            self.states.append("Deleted")
            return
        ready = [c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"]
        self.states.append(ready[0]["status"] if ready else "None")


def run_cronjob(box: Sandbox, minutes: int, stay: float, skipped: tuple[int, ...] = ()) -> None:
    """One run per minute (except `skipped`), each starting START_UP_SECONDS late."""
    for minute in range(minutes):
        period_start = box.clock.now()
        if minute not in skipped:
            box.advance(START_UP_SECONDS)
            box.restart()  # a new process: new clients, new engine
            started = box.clock.now()
            box.tick()
            assert stay_beating(box.heartbeat, started, stay, 10, box.clock.sleep) == 0
        box.advance(60 - (box.clock.now() - period_start).total_seconds())


def add_pods(box: Sandbox) -> None:
    for name in PODS:
        box.add_pod(name, ports=[8080])


def live_instances(box: Sandbox) -> dict[str, str]:
    """Pod name → instance id, for pods that exist and are not being deleted."""
    found = {}
    for name in PODS:
        pod = box.pod(name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            continue
        instance = box.instance_for(pod)
        if instance is not None and instance["status"] == "RUNNING":
            found[name] = instance["id"]
    return found


def test_runs_a_minute_apart_keep_every_instance_for_20_minutes(box: Sandbox) -> None:
    add_pods(box)
    run_cronjob(box, 2, stay=STAY)
    first = live_instances(box)
    watcher = NodeWatcher(box)
    assert set(first) == set(PODS)

    run_cronjob(box, 18, stay=STAY)

    assert live_instances(box) == first  # the same instances, all running
    assert set(watcher.states) == {"True"}  # never NotReady, never deleted
    for name in PODS:
        pod = box.pod(name) or {}
        assert pod["status"]["phase"] == "Running"
        ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"


def test_with_stay_a_missed_run_loses_no_instance(box: Sandbox) -> None:
    """The node goes NotReady and the cloud controller deletes it, but the next run
    registers it again within pod GC's quarantine."""
    add_pods(box)
    run_cronjob(box, 2, stay=STAY)
    first = live_instances(box)
    watcher = NodeWatcher(box)

    run_cronjob(box, 6, stay=STAY, skipped=(2,))

    assert live_instances(box) == first
    assert "Deleted" in watcher.states and watcher.states[-1] == "True"


def test_without_stay_the_node_goes_not_ready_between_runs(box: Sandbox) -> None:
    add_pods(box)
    watcher = NodeWatcher(box)
    run_cronjob(box, 5, stay=0)
    assert {"Unknown", "Deleted"} & set(watcher.states)


def test_without_stay_a_missed_run_loses_every_instance(box: Sandbox) -> None:
    add_pods(box)
    run_cronjob(box, 2, stay=0)
    assert set(live_instances(box)) == set(PODS)

    run_cronjob(box, 6, stay=0, skipped=(2,))

    assert live_instances(box) == {}


@pytest.mark.parametrize(("stay", "warned"), [(0, True), (STAY, False)])
def test_a_run_says_when_the_node_went_unrenewed_too_long(
    box: Sandbox,
    caplog: pytest.LogCaptureFixture,
    stay: float,
    warned: bool,
) -> None:
    add_pods(box)
    with caplog.at_level(logging.WARNING, logger="reconciler.runtime.process.heartbeat"):
        run_cronjob(box, 3, stay=stay)
    late = [r for r in caplog.records if "had not been renewed" in r.getMessage()]
    assert bool(late) is warned
