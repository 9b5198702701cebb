"""Graces run on clocks that do not step (docs/architecture.md §4, "Clocks"): inside a
process on the monotonic clock, across processes on RunPod's own time (the Date of its
answers, against which its `createdAt` is stamped). A step of the reconciler's host
clock, forward or back by ten minutes, makes no duplicate and collects nothing early.

Found on main: the wall clock stepped forward 600 s after two creates answered 500
(RunPod made both) while the list lagged 20 s; the create graces, measured on the wall
clock, were over at once, and a second instance and a second cluster were made."""

from __future__ import annotations

import pytest

from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.demo.sandbox import Sandbox

from .test_gang_end_on_pods import cluster_posts

STEPS = [600, -600]


def pod_posts(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods"))


@pytest.mark.parametrize("step", STEPS)
def test_a_step_of_the_clock_makes_no_second_instance(box: Sandbox, step: int) -> None:
    box.runpod_sim.account.set_listing_lag(20)
    box.runpod_sim.faults.create_then_fail(1, 500)  # made, the answer lost
    box.add_pod("a")
    box.tick()
    box.step_wall_clock(step)
    box.advance(5)
    box.tick()  # still not listed
    box.advance(20)
    box.tick()
    box.advance(60)
    box.tick()
    assert pod_posts(box) == 1
    assert len(box.runpod_sim.instances) == 1


@pytest.mark.parametrize("step", STEPS)
def test_a_step_of_the_clock_after_a_restart_makes_no_second_instance(
    box: Sandbox, step: int
) -> None:
    """The next process measures the row's attempt on the same clock: RunPod's."""
    box.runpod_sim.account.set_listing_lag(20)
    box.runpod_sim.faults.create_then_fail(1, 500)
    box.add_pod("a")
    box.tick()
    box.step_wall_clock(step)
    box.restart()
    box.advance(5)
    box.tick()
    box.advance(20)
    box.tick()
    assert pod_posts(box) == 1
    assert len(box.runpod_sim.instances) == 1


@pytest.mark.parametrize("step", STEPS)
def test_a_step_of_the_clock_makes_no_second_cluster(box: Sandbox, step: int) -> None:
    box.add_indexed_job("train", 2)
    box.runpod_sim.account.set_listing_lag(20)
    box.runpod_sim.faults.create_then_fail(1, 500)
    box.tick()
    box.step_wall_clock(step)
    box.advance(5)
    box.tick()
    box.advance(20)
    box.tick()
    box.advance(60)
    box.tick()
    assert cluster_posts(box) == 1
    assert len(box.runpod_sim.clusters) == 1


def test_a_step_forward_collects_no_orphan_early(box: Sandbox) -> None:
    """An instance of ours whose pod does not exist goes after the orphan grace (60 s
    here) counted from RunPod's createdAt: a step of the host's clock does not shorten
    it."""
    box.tick()
    tags = {OWNER_ENV: box.settings.owner_id, POD_UID_ENV: "0b6a3a3e-no-such-pod"}
    orphan = box.runpod_sim.add_instance("default-gone", env=tags)
    box.step_wall_clock(600)
    for _ in range(4):
        box.tick()
        box.advance(5)
    assert orphan in box.runpod_sim.instances
    box.advance(60)
    box.tick()
    box.tick()
    assert orphan not in box.runpod_sim.instances  # the grace still ends
