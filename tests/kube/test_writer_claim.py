"""The node's writer Lease (issue 16), through the real client against the simulator:
a second writer is refused with the holder's name, the holder renews once a third of
the lease has passed, a writer whose Lease was taken stops with WriterLost, a dead
process of this host loses its Lease at once, and release lets the next writer in."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from reconciler.adapters.kube.client import NODE_LEASE_NAMESPACE, KubeClient
from reconciler.runtime.claim import (
    WRITER_LEASE_SECONDS,
    WriterClaim,
    WriterHeld,
    WriterLost,
    writer_lease_name,
)
from reconciler.sim.clock import SimClock
from reconciler.sim.kube import KubeSimulator


def claim(kube: KubeClient, clock: SimClock, owner: str) -> WriterClaim:
    return WriterClaim(kube, "gpu-node", clock.now, clock.monotonic, owner=owner)


def holder(sim: KubeSimulator) -> str | None:
    lease = sim.get("leases", NODE_LEASE_NAMESPACE, writer_lease_name("gpu-node")) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


def test_a_second_writer_is_refused_with_the_holders_name(
    kube: KubeClient,
    clock: SimClock,
    sim: KubeSimulator,
) -> None:
    claim(kube, clock, "host-a/1").acquire()
    with pytest.raises(WriterHeld) as refused:
        claim(kube, clock, "host-b/2").acquire()
    assert str(refused.value).startswith("another reconciler (host-a/1) acts for node gpu-node")
    assert "kube-node-lease/gpu-node-writer" in str(refused.value)
    assert holder(sim) == "host-a/1"


def test_the_holder_renews_once_a_third_has_passed_and_keeps_the_others_out(
    kube: KubeClient,
    clock: SimClock,
    sim: KubeSimulator,
) -> None:
    first = claim(kube, clock, "host-a/1")
    first.acquire()
    writes = len(sim.requests)
    first.keep()
    assert len(sim.requests) == writes  # not due yet: no request
    for _ in range(6):  # two leases' worth of time, renewed all along
        clock.advance(WRITER_LEASE_SECONDS / 3)
        first.keep()
    with pytest.raises(WriterHeld):
        claim(kube, clock, "host-b/2").acquire()


def test_a_writer_whose_lease_was_taken_stops(
    kube: KubeClient,
    clock: SimClock,
) -> None:
    first = claim(kube, clock, "host-a/1")
    first.acquire()
    clock.advance(WRITER_LEASE_SECONDS)  # it could not renew: expired
    claim(kube, clock, "host-b/2").acquire()
    with pytest.raises(WriterLost, match="to host-b/2"):
        first.keep()
    with pytest.raises(WriterLost):
        first.keep()  # and stays stopped


def test_release_lets_the_next_writer_in_at_once(
    kube: KubeClient,
    clock: SimClock,
    sim: KubeSimulator,
) -> None:
    first = claim(kube, clock, "host-a/1")
    first.acquire()
    first.release()
    claim(kube, clock, "host-b/2").acquire()
    assert holder(sim) == "host-b/2"


def test_the_lease_of_a_dead_process_on_this_host_is_taken_at_once(
    kube: KubeClient,
    clock: SimClock,
    sim: KubeSimulator,
) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = f"{socket.gethostname()}/{finished.stdout.strip()}"
    claim(kube, clock, dead).acquire()
    claim(kube, clock, f"{socket.gethostname()}/{os.getpid()}").acquire()
    assert holder(sim) == f"{socket.gethostname()}/{os.getpid()}"
