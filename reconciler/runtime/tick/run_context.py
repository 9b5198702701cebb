"""One run's context (`RunContext`): what every resource's steps share while they carry out
a plan (docs/architecture.md §4). Its writes are the journal's entries; the rest is the
run's shared state.

Every RunPod or Kubernetes call that changes something is made through `journaled`: an
entry is opened before the call and closed with its outcome after it, committed first
where the protocol needs the intent durable. Besides the writes, the run's shared state
lives here: whether creates stopped this run (a refusal, the quota, the deadline), the
creates left for a later tick, those in doubt, and the pods whose status patch failed
(a resource whose end must be on its pods first waits for them).

Each resource's steps (`runtime/tick/resources/`) hold the context, never the executor: the
executor holds the steps, so nothing of a run refers back to what made it and the run's
data goes when the tick ends.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TypeVar

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.batch import JournalEntry, WriteBatch
from reconciler.core.actions import PodRef
from reconciler.core.reasons import EventReason
from reconciler.runtime.process_log import Decision, decision
from reconciler.runtime.tick import crashpoints

log = logging.getLogger(__name__)

Found = TypeVar("Found")
Result = TypeVar("Result")


class RunContext:
    def __init__(
        self,
        runpod: RunPodClient,
        kube: KubeClient,
        writes: WriteBatch,
        clock: Callable[[], datetime],
        tick_id: Callable[[], int],
        creates_held: Callable[[], bool] = lambda: False,
        annotate_created: bool = False,
    ) -> None:
        self.runpod, self.kube, self.writes, self.clock = runpod, kube, writes, clock
        self._tick_id = tick_id
        self.creates_held = creates_held
        """True while no create may start (`runtime/process/writer_lease.py`)."""
        self.annotate_created = annotate_created
        """Write each new resource's id onto its pods before the run ends (`sync --once`,
        whose next run may be another writer; the loop's next tick mirrors it anyway)."""
        self.creates_stopped: str | None = None
        """Why no more creates are tried this run (a refusal, our quota share spent)."""
        self.deferred = 0
        """Creates left for a later tick: creates stopped, held, or past the deadline."""
        self.past_deadline = False
        """Whether creates were left over because the tick's deadline had passed."""
        self.in_doubt = 0
        """Creates whose answer was lost: they may have made a resource no pod names."""
        self.status_failed: set[str] = set()
        """Pods whose status patch failed in this run: their end is not on them yet."""
        self._steps: list[weakref.ref[object]] = []
        """Each resource's steps for this run, held by the executor: weakly here, since
        the steps hold the context (a cycle would keep the tick's data for the cycle
        collector instead of letting it go when the tick ends)."""

    def know_steps(self, steps: Iterable[object]) -> None:
        self._steps = [weakref.ref(one) for one in steps]

    def steps_of(self, kind: type[Found]) -> Found:
        """This run's steps of one resource: another resource's steps use them (an
        instance pulls with a registry credential), as does a resource's phase after
        the pods' actions."""
        for ref in self._steps:
            steps = ref()
            if isinstance(steps, kind):
                return steps
        raise LookupError(f"no {kind.__name__} registered")

    def creates_wait(self) -> bool:
        """Whether a create must wait for a later tick: creates stopped (our quota share
        spent counts), the tick's deadline passed, or a dead writer's create may land."""
        budget = self.runpod.rate_budget
        if budget is not None and budget <= 0 and not self.creates_stopped:
            # Not sleeping until the window resets inside this tick: the next tick comes
            # at the reset and divides the fresh window among the reconcilers on the key.
            self.creates_stopped = "our share of RunPod's rate limit is spent for now"
        return bool(self.creates_stopped) or self.runpod.past_deadline or self.creates_held()

    def journaled(
        self,
        kind: str,
        pod_uid: str | None,
        resource_id: str | None,
        call: Callable[[], Result],
        durable_at: str | None = None,
        made: Callable[[Result], str] | None = None,
    ) -> Result:
        """Make `call` with its journal entry around it. With `durable_at` (a crash
        point's name), everything noted so far, this entry included, is committed
        before the call: the protocol's intent rows (docs/architecture.md §4), and a
        journal entry left open if the process dies during the call. A failed commit
        fails the action before the call is made. A create's steps say, with `made`,
        which id of the call's answer is the resource it made: the entry is closed with
        it."""
        entry = self.writes.open_action(self._tick_id(), kind, pod_uid, resource_id, self.clock())
        if durable_at is not None:
            self.writes.commit()
            crashpoints.reached(durable_at)
        try:
            result = call()
        except Exception as exc:
            self._close(entry, "failed", str(exc))
            raise
        self._close(entry, "ok", None, made(result) if made is not None else None)
        return result

    def _close(
        self, entry: JournalEntry, outcome: str, error: str | None, created: str | None = None
    ) -> None:
        self.writes.close_action(entry, outcome, error, self.clock(), resource_id=created)

    def decided(
        self,
        action: str,
        pod: PodRef | None,
        resource_id: str | None,
        reason: str,
        price: float | None = None,
    ) -> None:
        """One decision line of the reconciler's log (`runtime/process_log.py`)."""
        decision(
            Decision(
                action,
                pod.namespace if pod else None,
                pod.name if pod else None,
                resource_id,
                reason,
                price,
                self._tick_id(),
            )
        )

    def event(self, pod: PodRef, reason: EventReason, message: str, warning: bool = False) -> None:
        """An Event on the pod."""
        involved = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid},
        }
        self.kube.events.record(involved, reason.value, message, "Warning" if warning else "Normal")
