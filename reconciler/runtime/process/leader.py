"""Leader election on a coordination.k8s.io Lease, so that of several replicas one acts.

Timing follows client-go's leader election, scaled to the lease: a candidate tries every
third of the lease (`retry_period`), the leader renews on the same beat and gives up
leading when it could not renew for two thirds of it (`renew_deadline`). So a leader
that lost its API server stops acting a third of a lease before anybody may take over,
and when a leader dies a standby takes over within one lease plus one retry period.
Expiry is judged against the renewTime the holder wrote, so the replicas' clocks must
agree to well under a third of the lease (NTP does that).

`Election` is the pure state; `LeaderElector` adds the Kubernetes calls.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.errors import KubeError

log = logging.getLogger(__name__)

DEFAULT_LEASE_NAME = "runpod-reconciler-leader"
DEFAULT_LEASE_SECONDS = 15


class Attempt(enum.Enum):
    WON = "won"
    """We hold the lease now (acquired or renewed)."""
    REFUSED = "refused"
    """Somebody else holds a valid lease, or wrote it just before us."""
    UNREACHABLE = "unreachable"
    """No answer: we cannot tell who holds it."""


class Change(enum.Enum):
    STARTED_LEADING = "started leading"
    STOPPED_LEADING = "stopped leading"


@dataclass
class Election:
    """What the attempts so far mean; `now` is any monotonic seconds."""

    renew_deadline: float
    leading: bool = False
    last_renewed: float | None = None

    def observe(self, attempt: Attempt, now: float) -> Change | None:
        if attempt is Attempt.WON:
            self.last_renewed = now
            if not self.leading:
                self.leading = True
                return Change.STARTED_LEADING
            return None
        if not self.leading:
            return None
        # Refused while leading: another replica took the lease over, so we must stop
        # at once. Unreachable: we may still hold it, until the renew deadline.
        overdue = self.last_renewed is None or now - self.last_renewed >= self.renew_deadline
        if attempt is Attempt.REFUSED or overdue:
            self.leading = False
            return Change.STOPPED_LEADING
        return None


class LeaderElector:
    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: int,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float],
    ) -> None:
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.lease_seconds = lease_seconds
        self.retry_period = lease_seconds / 3
        self.clock, self.monotonic = clock, monotonic
        self.election = Election(renew_deadline=lease_seconds * 2 / 3)
        self.predecessor: str | None = None
        """The leader whose expired lease we took over; it stopped acting before expiry."""
        self.took_over = False
        """Our last attempt won the lease from a holder that had not released it."""
        self.creates_held_until: datetime | None = None
        """No create starts before this (see `runtime/process/writer_lease.py`); None when
        no hold."""
        self.holder: str | None = None
        """Who held the lease when our last attempt was refused."""
        self.error: KubeError | None = None
        """Why our last attempt had no answer."""

    @property
    def leading(self) -> bool:
        return self.election.leading

    def attempt(self, dead_holder: str | None = None) -> tuple[Attempt, Change | None]:
        """One try to acquire or renew the lease, and what it changed. A `dead_holder`'s
        lease is taken at once (see `KubeClient.leases.try_acquire`)."""
        try:
            outcome = self.kube.leases.try_acquire(
                self.namespace,
                self.name,
                self.identity,
                self.lease_seconds,
                self.clock(),
                dead_holder=dead_holder,
            )
            attempt = Attempt.WON if outcome.won else Attempt.REFUSED
            self.holder, self.error = outcome.holder, None
            self.took_over = bool(outcome.won and outcome.taken_over_from)
            if outcome.taken_over_from:
                self.predecessor = outcome.taken_over_from
            if outcome.won and outcome.creates_held_until is not None:
                self.creates_held_until = outcome.creates_held_until
        except KubeError as exc:
            log.warning(
                "leader election: no answer about lease %s/%s: %s", self.namespace, self.name, exc
            )
            attempt, self.error = Attempt.UNREACHABLE, exc
        return attempt, self.election.observe(attempt, self.monotonic())

    def release(self, hold_creates_until: datetime | None = None) -> None:
        """Hand the lease back, so a standby takes over now instead of after expiry;
        `hold_creates_until` passes a hold on creates on to it (see
        `runtime/process/writer_lease.py`)."""
        if not self.election.leading:
            return
        self.election.leading = False
        try:
            self.kube.leases.release(self.namespace, self.name, self.identity, hold_creates_until)
            log.info("released leader lease %s/%s", self.namespace, self.name)
        except KubeError as exc:
            log.warning(
                "could not release leader lease %s/%s (it expires in %d s): %s",
                self.namespace,
                self.name,
                self.lease_seconds,
                exc,
            )
