"""The hold on creates after a writer dies covers RunPod's list lag (docs/architecture.md
§4, "One writer per node"): no successor creates what the dead writer may have created
until the list can be trusted to show it, for the create grace from the takeover, not
the dead writer's Lease term.

Found on main: a Deployment-mode writer SIGKILLed right after a create's POST, 9 s after
it renewed its Lease, its database lost, RunPod's list lagging 25 s (less than the 30 s
Lease and the create grace): the successor's hold ended 21 s after the POST, and it made
a second instance (or a second cluster). In a CronJob chain on fresh databases, a
successor that took over the expired Lease held nothing at all: a 45 s lag gave two."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.process.writer_lease import WriterHeld, WriterLease
from reconciler.runtime.tick import crashpoints
from tests.integration.conftest import FAST
from tests.kube.test_writer_lease import THIS_PROCESS, dead_process

from .test_gang_end_on_pods import cluster_posts, delete_database

GRACE = 120


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(FAST.with_values(create_grace_time=GRACE)) as sandbox:
        yield sandbox


def writer(box: Sandbox, owner: str) -> WriterLease:
    """This process's writer Lease, kept around the engine's actions as `sync` keeps it."""
    lease = WriterLease(
        box.kube,
        box.settings.node.name,
        box.wall_clock,
        box.clock.monotonic,
        owner=owner,
        hold_seconds=box.settings.timing.create_grace_time,
        steady=box.engine.clock,
    )
    box.engine.hooks = replace(
        box.engine.hooks, before_action=lease.keep, creates_held=lease.creates_held
    )
    return lease


def _die() -> None:
    raise crashpoints.SimulatedCrash


def killed_after_the_post(box: Sandbox, owner: str, point: str) -> None:
    """A writer acquires, renews, and is killed 9 s later right after a create's POST;
    its database is lost with it."""
    writer(box, owner).acquire()
    box.advance(9)
    crashpoints.arm(f"{point}:1", die=_die)
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    delete_database(box)
    box.restart()


def pod_posts(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods"))


@pytest.mark.parametrize("kind", ["pod", "gang"])
def test_a_successor_of_a_killed_writer_makes_nothing_twice(box: Sandbox, kind: str) -> None:
    box.runpod_sim.account.set_listing_lag(25)
    if kind == "pod":
        box.add_pod("a")
    else:
        box.add_indexed_job("train", 2)
    point = "after-create" if kind == "pod" else "after-cluster-create"
    killed_after_the_post(box, dead_process(), point)
    writer(box, THIS_PROCESS).acquire()  # a dead process of this host: taken at once
    for _ in range(30):  # a tick every 2 s, as watch events bring them
        box.advance(2)
        box.tick()
    if kind == "pod":
        assert pod_posts(box) == 1
        assert len(box.runpod_sim.instances) == 1
    else:
        assert cluster_posts(box) == 1
        assert len(box.runpod_sim.clusters) == 1


@pytest.mark.parametrize("kind", ["pod", "gang"])
def test_a_cronjob_chain_on_fresh_databases_makes_nothing_twice(box: Sandbox, kind: str) -> None:
    """Each run a new process with a new database: one tick, then the Lease released.
    The killed run's Lease expires, and the run that takes it over holds creates."""
    box.runpod_sim.account.set_listing_lag(45)
    if kind == "pod":
        box.add_pod("a")
    else:
        box.add_indexed_job("train", 2)
    point = "after-create" if kind == "pod" else "after-cluster-create"
    killed_after_the_post(box, "host-a/1", point)
    for run in range(12):
        box.advance(10)
        delete_database(box)
        box.restart()
        lease = writer(box, f"host-{run}/1")
        try:
            lease.acquire()
        except WriterHeld:
            continue  # the killed run's Lease has not expired yet
        box.tick()
        lease.release()
    if kind == "pod":
        assert pod_posts(box) == 1
        assert len(box.runpod_sim.instances) == 1
    else:
        assert cluster_posts(box) == 1
        assert len(box.runpod_sim.clusters) == 1


def test_the_hold_ends_after_the_create_grace(box: Sandbox) -> None:
    """The cost: after a takeover, a new pod starts once the create grace is over."""
    box.add_pod("a")
    killed_after_the_post(box, dead_process(), "after-create")
    writer(box, THIS_PROCESS).acquire()
    box.add_pod("b")
    box.advance(GRACE - 5)
    box.tick()
    assert "b" not in {i["name"].split("-")[1] for i in box.runpod_sim.instances.values()}
    box.advance(6)
    box.tick()
    assert pod_posts(box) == 2  # b's create, and a's none: its instance was adopted
