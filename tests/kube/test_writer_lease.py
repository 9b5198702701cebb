"""The node's writer Lease, through the real client against the simulator:
a second writer is refused with the holder's name, the holder renews once a third of
the lease has passed, a writer whose Lease was taken stops with WriterLost, a dead
process of this host loses its Lease at once (its successor starts no create until the
dead writer's term would have ended, a hold kept in the Lease for every writer inside
it), and release lets the next writer in (passing on a hold while a create of its last
tick is not on its pod)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.node import NODE_LEASE_NAMESPACE
from reconciler.runtime.writer_lease import (
    WRITER_LEASE_SECONDS,
    WriterHeld,
    WriterLease,
    WriterLost,
    writer_lease_name,
)
from reconciler.sim.clock import SimClock
from reconciler.sim.kube import KubeSimulator


def dead_process() -> str:
    """The identity of a process of this host that has finished."""
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return f"{socket.gethostname()}/{finished.stdout.strip()}"


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


def test_after_taking_over_a_dead_writer_creates_wait_until_its_term_would_have_ended(
    writer: Writer,
    clock: SimClock,
) -> None:
    dead = writer(dead_process())
    dead.acquire()
    assert not dead.creates_held()  # a free Lease: nobody else's create can be in flight
    clock.advance(12)
    successor = writer(THIS_PROCESS)
    successor.acquire()
    # The dead writer renewed 12 s ago: a create it sent may land until its term ends.
    assert successor.creates_held()
    clock.advance(WRITER_LEASE_SECONDS - 12 - 1)
    assert successor.creates_held()
    clock.advance(1)
    assert not successor.creates_held()


def test_the_hold_goes_on_with_the_lease_to_every_writer_inside_the_term(
    writer: Writer,
    clock: SimClock,
) -> None:
    """A successor that releases before the dead writer's term is over leaves the hold
    in the Lease: a third writer inside the term holds its creates too, and a fourth
    after it does not. A plain release leaves no hold."""
    writer(dead_process()).acquire()
    clock.advance(5)
    successor = writer(THIS_PROCESS)
    successor.acquire()
    assert successor.creates_held()
    successor.release()
    clock.advance(2)
    third = writer("host-c/3")
    third.acquire()
    assert third.creates_held()
    third.release()
    clock.advance(WRITER_LEASE_SECONDS - 5 - 2)
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
    clock.advance(1)
    second = writer("host-b/2")
    second.acquire()
    assert second.creates_held()
    second.unrecorded_creates(0)
    second.release()
    clock.advance(WRITER_LEASE_SECONDS)
    third = writer("host-c/3")
    third.acquire()
    assert not third.creates_held()
    third.release()  # nothing unrecorded: no hold
    fourth = writer("host-d/4")
    fourth.acquire()
    assert not fourth.creates_held()


def test_a_writer_that_takes_over_an_expired_lease_does_not_wait(
    writer: Writer,
    clock: SimClock,
) -> None:
    writer("host-a/1").acquire()
    clock.advance(WRITER_LEASE_SECONDS)  # its holder stopped acting before the term ended
    successor = writer("host-b/2")
    successor.acquire()
    assert not successor.creates_held()


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
