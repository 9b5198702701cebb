"""One writer per virtual node, arbitrated by the API server (docs/architecture.md §4).

The database lock keeps apart two writers of one database, and leader election the
replicas of one Deployment. Neither stops a CronJob, a second replica with its own SQLite
file or a manual `sync --once` from acting for the same node at the same time, and two
such writers create an instance each and then heal each other's as duplicates. So every
writer, `--once` included, holds the node's writer Lease (coordination.k8s.io, in
kube-node-lease, next to the node's heartbeat Lease) before it acts, and renews it
while it acts: before each action, once a third of the lease has passed. A second
writer is refused with the holder's name, whatever its database.

The Lease logic is the leader election's (`leader.LeaderElector`): a writer that could
not renew for two thirds of the lease stops acting before anybody may take over.

A dead process of this host loses its Lease at once, and an expired one is taken over
as elsewhere; either way its successor starts no create for the create grace
(`--create-grace-time`), counted on its monotonic clock from the takeover. The writer
before it may have sent a create just before it died, and RunPod may list it only up to
the create grace later (the window in which every create is already assumed to lag);
the successor (perhaps on another database) cannot see its intent row, so it would
create the instance a second time. Once the hold is over, RunPod's list shows it, and it
is adopted by its tags. Terminates and status updates do not wait.

The hold goes on in the Lease (`CREATES_HELD_ANNOTATION`), not only in the successor: a
`--once` successor releases the Lease when its run ends, and a second successor inside
the hold, on a database of its own, would otherwise take the free Lease with no hold and
create the instance a second time. A writer's own creates need the same care: a run of
`--once` writes each new instance's id onto its pod before it ends, and a writer that
releases with a create of its last tick not on its pod (the answer was lost, the pod
patch failed, the loop's tick just before it stopped) passes on a hold for the create
grace. What the Lease carries is a moment on RunPod's time (`steady`: the Date of its
answers), compared at each create, so a step of either host's clock does not end it
early.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.node import NODE_LEASE_NAMESPACE
from reconciler.runtime.process.leader import Attempt, Change, LeaderElector
from reconciler.runtime.tick.executor import WriterLost

log = logging.getLogger(__name__)

# Long enough that the longest single request of a tick (bounded by the tick deadline)
# fits inside the renew deadline; short enough that a writer killed without releasing
# it blocks the next CronJob run only briefly.
WRITER_LEASE_SECONDS = 30
DEFAULT_HOLD_SECONDS = 120.0
"""The create grace's default (`--create-grace-time`): how long creates wait after taking
over from a writer that did not release the Lease."""


class WriterHeld(RuntimeError):
    """Another writer acts for this node right now."""


def writer_lease_name(node_name: str) -> str:
    return f"{node_name}-writer"


def identity() -> str:
    """Who writes: host and process, enough to find the other reconciler."""
    return f"{socket.gethostname()}/{os.getpid()}"


def dead_here(holder: str) -> bool:
    """Whether `holder` (host/pid) is a process of this host that no longer runs."""
    host, _, pid = holder.rpartition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class WriterLease:
    """The node's writer Lease, for as long as this process acts for the node."""

    def __init__(
        self,
        kube: KubeClient,
        node_name: str,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float],
        lease_seconds: int = WRITER_LEASE_SECONDS,
        owner: str | None = None,
        hold_seconds: float = DEFAULT_HOLD_SECONDS,
        steady: Callable[[], datetime] | None = None,
    ) -> None:
        """`hold_seconds` is the create grace; `steady` the clock a hold in the Lease is
        written and read on (RunPod's time, `Engine.clock`; `clock` by default)."""
        self.node_name = node_name
        self.elector = LeaderElector(
            kube,
            NODE_LEASE_NAMESPACE,
            writer_lease_name(node_name),
            owner or identity(),
            lease_seconds,
            clock,
            monotonic,
        )
        self.monotonic = monotonic
        self.lease_seconds = lease_seconds
        self.hold_seconds = hold_seconds
        self.steady = steady or clock
        self._held_mono: float | None = None
        """No create starts before this monotonic time: a writer we took over from."""
        self.lost = False
        self._unrecorded = False
        self._tried = monotonic()
        # The loop keeps the Lease from its own job and from the tick's actions: two
        # renewals at once would race on the resourceVersion, and the loser would
        # read its own 409 as having lost the Lease.
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"Lease {self.elector.namespace}/{self.elector.name}"

    def acquire(self) -> None:
        """Take the Lease or raise WriterHeld naming who holds it."""
        attempt, _ = self._attempt()
        holder = self.elector.holder
        if attempt is Attempt.REFUSED and holder and dead_here(holder):
            log.warning(
                "taking over the writer %s of %s, a dead process on this host", self.where, holder
            )
            attempt, _ = self._attempt(dead_holder=holder)
        if self.elector.leading and self.creates_held():
            log.warning(
                "no create starts for %.0f s: a writer before us may have made an instance "
                "that RunPod does not list yet (a create in flight when it died, or one it "
                "could not record on its pod)",
                self._hold_left(),
            )
        if not self.elector.leading:
            who = (
                f"another reconciler ({self.elector.holder})"
                if self.elector.holder
                else "another reconciler"
            )
            if attempt is Attempt.UNREACHABLE:
                raise WriterHeld(
                    f"cannot tell who acts for node {self.node_name}: no "
                    f"answer about the {self.where}: {self.elector.error}"
                )
            raise WriterHeld(
                f"{who} acts for node {self.node_name}: it holds the "
                f"{self.where}; try again once it has finished"
            )

    def creates_held(self) -> bool:
        """Whether creates must wait: a hold on creates is not over."""
        return self._hold_left() > 0

    def _hold_left(self) -> float:
        """Seconds left of the hold on creates: ours from a takeover, or the Lease's."""
        left = 0.0
        if self._held_mono is not None:
            left = self._held_mono - self.monotonic()
        until = self.elector.creates_held_until
        if until is not None:
            left = max(left, (until - self.steady()).total_seconds())
        return left

    def unrecorded_creates(self, count: int) -> None:
        """How many creates of our last tick may have made an instance whose id is not
        on its pod (a later tick of ours writes it: only the last tick's count)."""
        self._unrecorded = count > 0

    def keep(self) -> None:
        """Renew once a third of the lease has passed; raise WriterLost once it is gone."""
        with self._lock:
            self._keep()

    def _keep(self) -> None:
        if self.lost:
            raise WriterLost(f"lost the writer {self.where} of node {self.node_name}")
        if self.monotonic() - self._tried < self.elector.retry_period:
            return
        _, change = self._attempt()
        if change is Change.STOPPED_LEADING:
            self.lost = True
            raise WriterLost(
                f"lost the writer {self.where} of node {self.node_name}"
                + (f" to {self.elector.holder}" if self.elector.holder else "")
            )

    def release(self) -> None:
        """Give the Lease up; with a create not recorded on its pod, the rest of the term
        goes on as a hold on creates, as if we had let the term run out."""
        left = max(self._hold_left(), self.hold_seconds if self._unrecorded else 0.0)
        hold = self.steady() + timedelta(seconds=left) if left > 0 else None
        if hold is not None:
            log.warning("releasing the writer %s with creates held until %s", self.where, hold)
        self.elector.release(hold)

    def _attempt(self, dead_holder: str | None = None) -> tuple[Attempt, Change | None]:
        self._tried = self.monotonic()
        attempt, change = self.elector.attempt(dead_holder)
        if self.elector.took_over:
            # The writer before us did not release the Lease: it died, or stopped acting.
            self._held_mono = self.monotonic() + self.hold_seconds
        return attempt, change
