"""The node's writer Lease, through the real client against the simulator:
a second writer is refused with the holder's name, the holder renews once a third of
the lease has passed, a writer whose Lease was taken stops with WriterLost, a dead
process of this host loses its Lease at once (its successor, as one that takes over an
expired Lease, starts no create for the create grace, a hold passed on in the Lease to
every writer inside it), and release lets the next writer in (passing on a hold while a
create of its last tick is not on its pod)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.node import NODE_LEASE_NAMESPACE
from reconciler.runtime.process.writer_lease import (
    DEFAULT_HOLD_SECONDS,
    WRITER_LEASE_SECONDS,
    WriterHeld,
    WriterLease,
    WriterLost,
    writer_lease_name,
)
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.simulator import KubeSimulator


def dead_process() -> str:
    """The identity of a process of this host that has finished."""
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return f"{socket.gethostname()}/{finished.stdout.strip()}"


HOLD = DEFAULT_HOLD_SECONDS

THIS_PROCESS = f"{socket.gethostname()}/{os.getpid()}"
"""A live process of this host: the identity a writer started here holds the Lease by."""

Writer = Callable[[str], WriterLease]


@pytest.fixture
def writer(kube: KubeClient, clock: SimClock) -> Writer:
    """A writer Lease of node gpu-node for the given identity, on the test's clock."""
    return lambda owner: WriterLease(kube, "gpu-node", clock.now, clock.monotonic, owner=owner)


def holder(sim: KubeSimulator) -> str | None:
    lease = sim.get("leases", NODE_LEASE_NAMESPACE, writer_lease_name("gpu-node")) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


def test_a_second_writer_is_refused_with_the_holders_name(
    writer: Writer,
    sim: KubeSimulator,
) -> None:
    writer("host-a/1").acquire()
    with pytest.raises(WriterHeld) as refused:
        writer("host-b/2").acquire()
    assert str(refused.value).startswith("another reconciler (host-a/1) acts for node gpu-node")
    assert "kube-node-lease/gpu-node-writer" in str(refused.value)
    assert holder(sim) == "host-a/1"


def test_the_holder_renews_once_a_third_has_passed_and_keeps_the_others_out(
    writer: Writer,
    clock: SimClock,
    sim: KubeSimulator,
) -> None:
    first = writer("host-a/1")
    first.acquire()
    writes = len(sim.requests)
    first.keep()
    assert len(sim.requests) == writes  # not due yet: no request
    for _ in range(6):  # two leases' worth of time, renewed all along
        clock.advance(WRITER_LEASE_SECONDS / 3)
        first.keep()
    with pytest.raises(WriterHeld):
        writer("host-b/2").acquire()


def test_a_writer_whose_lease_was_taken_stops(
    writer: Writer,
    clock: SimClock,
) -> None:
    first = writer("host-a/1")
    first.acquire()
    clock.advance(WRITER_LEASE_SECONDS)  # it could not renew: expired
    writer("host-b/2").acquire()
    with pytest.raises(WriterLost, match="to host-b/2"):
        first.keep()
    with pytest.raises(WriterLost):
        first.keep()  # and stays stopped


def test_release_lets_the_next_writer_in_at_once(
    writer: Writer,
    sim: KubeSimulator,
) -> None:
    first = writer("host-a/1")
    first.acquire()
    first.release()
    writer("host-b/2").acquire()
    assert holder(sim) == "host-b/2"


def test_the_lease_of_a_dead_process_on_this_host_is_taken_at_once(
    writer: Writer,
    sim: KubeSimulator,
) -> None:
    writer(dead_process()).acquire()
    writer(THIS_PROCESS).acquire()
    assert holder(sim) == THIS_PROCESS


def test_after_taking_over_a_dead_writer_creates_wait_the_create_grace(
    writer: Writer,
    clock: SimClock,
) -> None:
    """The dead writer's last create may lag in RunPod's list for up to the create
    grace after it was sent (it died 9 s after renewing: its term is no bound)."""
    dead = writer(dead_process())
    dead.acquire()
    assert not dead.creates_held()  # a free Lease: nobody else's create can be in flight
    clock.advance(9)
    successor = writer(THIS_PROCESS)
    successor.acquire()
    assert successor.creates_held()
    clock.advance(WRITER_LEASE_SECONDS)  # past the dead writer's term
    assert successor.creates_held()
    clock.advance(HOLD - WRITER_LEASE_SECONDS - 1)
    assert successor.creates_held()
    clock.advance(1)
    assert not successor.creates_held()


def test_the_hold_goes_on_with_the_lease_to_every_writer_inside_it(
    writer: Writer,
    clock: SimClock,
) -> None:
    """A successor that releases before its hold is over leaves the rest in the Lease:
    a third writer inside it holds its creates too, and a fourth after it does not. A
    plain release leaves no hold."""
    writer(dead_process()).acquire()
    clock.advance(5)
    successor = writer(THIS_PROCESS)
    successor.acquire()
    assert successor.creates_held()
    clock.advance(10)
    successor.release()
    clock.advance(2)
    third = writer("host-c/3")
    third.acquire()
    assert third.creates_held()
    third.release()
    clock.advance(HOLD - 10 - 2)
    fourth = writer("host-d/4")
    fourth.acquire()
    assert not fourth.creates_held()


def test_a_writer_releasing_with_a_create_not_on_its_pod_passes_a_hold_on(
    writer: Writer,
    clock: SimClock,
) -> None:
    first = writer("host-a/1")
    first.acquire()
    first.unrecorded_creates(1)  # e.g. its answer was lost, or the pod patch refused
    first.release()
    clock.advance(WRITER_LEASE_SECONDS)
    second = writer("host-b/2")
    second.acquire()
    assert second.creates_held()  # the list may lag for the create grace, not the term
    second.unrecorded_creates(0)
    second.release()
    clock.advance(HOLD - WRITER_LEASE_SECONDS)
    third = writer("host-c/3")
    third.acquire()
    assert not third.creates_held()
    third.release()  # nothing unrecorded: no hold
    fourth = writer("host-d/4")
    fourth.acquire()
    assert not fourth.creates_held()


def test_a_writer_that_takes_over_an_expired_lease_waits_the_create_grace(
    writer: Writer,
    clock: SimClock,
) -> None:
    """Its holder stopped acting (dead on another host, or cut off) without releasing:
    a create it sent just before may be listed up to the create grace later."""
    writer("host-a/1").acquire()
    clock.advance(WRITER_LEASE_SECONDS)
    successor = writer("host-b/2")
    successor.acquire()
    assert successor.creates_held()
    clock.advance(HOLD)
    assert not successor.creates_held()


def test_a_step_of_the_wall_clock_does_not_end_a_hold(kube: KubeClient, clock: SimClock) -> None:
    """The hold from a takeover runs on the monotonic clock, and the one passed on in
    the Lease is a moment of RunPod's time (`steady`), both apart from this host's."""
    step = timedelta()

    def wall() -> datetime:
        return clock.now() + step

    def make(owner: str) -> WriterLease:
        return WriterLease(kube, "gpu-node", wall, clock.monotonic, owner=owner, steady=clock.now)

    make("host-a/1").acquire()
    clock.advance(WRITER_LEASE_SECONDS)
    successor = make("host-b/2")
    successor.acquire()
    step = timedelta(seconds=600)
    assert successor.creates_held()
    successor.release()
    third = make("host-c/3")
    third.acquire()
    assert third.creates_held()


def test_a_writer_that_loses_the_race_for_the_lease_names_who_holds_it(
    writer: Writer,
    clock: SimClock,
    sim: KubeSimulator,
) -> None:
    writer("host-a/1").acquire()
    clock.advance(WRITER_LEASE_SECONDS)  # expired: anybody may take it
    # Another writer writes the Lease between our read and our write: our write is 409.
    sim.inject_fault("PUT", f"*/leases/{writer_lease_name('gpu-node')}", 409)
    with pytest.raises(WriterHeld) as refused:
        writer("host-b/2").acquire()
    assert str(refused.value).startswith("another reconciler (host-a/1) acts for node gpu-node")
