"""Carries out a plan, one action at a time, following the protocol of
docs/architecture.md §4.

Every side effect is journaled (`runtime/tick/run_context.py`): a row is opened before the call
and closed after it. One action failing never stops the others; it becomes a log line,
a journal outcome, a row note and (where a user must know) an Event on the pod. The
executor carries out the pods' own actions (status, annotations, finalize, bind,
Events); every cloud resource's actions go to that resource's steps
(`runtime/tick/resources/`), handed the run's one context (`run_context.py`). It names no resource.

Row and journal writes are gathered in one `WriteBatch` for the run and committed where
the protocol needs them durable (`journaled(..., durable_at=...)`: a create's intent
and journal row before the POST, a terminate's row and journal row before the DELETE)
and once at the end of the run; the batch's docstring argues why nothing else needs to
be committed sooner.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.actions import (
    Action,
    Bind,
    DeleteRow,
    Event,
    FinalizePod,
    PatchMetadata,
    PatchStatus,
    SaveRow,
)
from reconciler.core.reasons import Notice
from reconciler.runtime.tick import crashpoints
from reconciler.runtime.tick.resources.base import (
    AlreadyTold,
    Deferred,
    Resource,
    StepRefused,
    Steps,
)
from reconciler.runtime.tick.run_context import RunContext

log = logging.getLogger(__name__)


class WriterLost(RuntimeError):
    """We could not keep the node's writer Lease: stop acting at once. Raised by the
    `before_action` the process hands the tick (runtime/process/writer_lease.py)."""


@dataclass
class Outcome:
    applied: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    done: list[Action] = field(default_factory=list)


class Executor:
    def __init__(
        self,
        runpod: RunPodClient,
        kube: KubeClient,
        store: Store,
        clock: Callable[[], datetime],
        tick_id: Callable[[], int],
        resources: Sequence[Resource] = (),
        before_action: Callable[[], None] = lambda: None,
        creates_held: Callable[[], bool] = lambda: False,
        unrecorded_creates: Callable[[int], None] = lambda _count: None,
        annotate_created: bool = False,
    ) -> None:
        """`resources` carry out their own actions, each with its steps for this run."""
        self.kube, self.clock = kube, clock
        self.writes = store.batch()
        self.context = RunContext(
            runpod, kube, self.writes, clock, tick_id, creates_held, annotate_created
        )
        self._steps: list[Steps] = [resource.steps(self.context) for resource in resources]
        self.context.know_steps(self._steps)
        # Keeps the node's writer Lease; raises WriterLost, which ends the run.
        self._before_action = before_action
        # Told at the end of the run how many of its creates may have made a resource
        # whose id is not on its pods: the writer Lease, released now, then passes a
        # hold on creates to whoever takes it next (runtime/process/writer_lease.py).
        self._unrecorded_creates = unrecorded_creates

    @property
    def deferred(self) -> int:
        """Creates left for a later tick: creates stopped, held, or past the deadline."""
        return self.context.deferred

    @property
    def past_deadline(self) -> bool:
        """Whether creates were left over because the tick's deadline had passed."""
        return self.context.past_deadline

    def run(self, actions: Iterable[Action]) -> Outcome:
        outcome = Outcome()
        try:
            for action in actions:
                self._run_one(action, outcome)
        except WriterLost:
            self._commit_rest(outcome)  # what was done is recorded, as it always was
            raise
        unrecorded = sum(steps.unrecorded() for steps in self._steps)
        self._unrecorded_creates(self.context.in_doubt + unrecorded)
        self._commit_rest(outcome)
        return outcome

    def _run_one(self, action: Action, outcome: Outcome) -> None:
        kind = type(action).__name__
        self._before_action()
        try:
            self._apply(action)
            outcome.applied[kind] += 1
            outcome.done.append(action)
        except Deferred:
            return  # waits for a later tick: neither done nor failed
        except WriterLost:
            raise
        except Exception as exc:  # one action never stops the others
            outcome.failed[kind] += 1
            outcome.errors.append(f"{kind} {_subject(action)}: {exc}")
            log.log(
                logging.DEBUG if isinstance(exc, AlreadyTold) else logging.WARNING,
                "%s for %s failed: %s",
                kind,
                _subject(action),
                exc,
                exc_info=not isinstance(exc, _EXPECTED),
            )
            self._report_failure(action, exc)
            if isinstance(action, PatchStatus):
                self.context.status_failed.add(action.pod.uid)

    def _commit_rest(self, outcome: Outcome) -> None:
        """The run's last commit. A failure loses only what the next tick observes again
        (see `reconciler.adapters.store.batch`), so it is an error of the tick, no more."""
        try:
            self.writes.commit()
        except Exception as exc:
            outcome.errors.append(f"store: {exc}")
            log.error("could not record this tick's results (the next tick re-reads them): %s", exc)

    def _apply(self, action: Action) -> None:
        match action:
            case PatchStatus(pod=pod, status=status, row=row, annotations=annotations):
                self.context.journaled(
                    "patch-status",
                    pod.uid,
                    None,
                    lambda: self.kube.pods.patch_status(
                        pod.namespace, pod.name, status, annotations
                    ),
                )
                crashpoints.reached("after-status-patch")
                if row is not None:
                    self.context.writes.save_row(row)
                if status.get("phase") == "Failed":
                    self.context.decided(
                        "fail",
                        pod,
                        row.instance_id if row else None,
                        f"{status.get('reason')}: {status.get('message')}",
                        row.cost_per_hr if row else None,
                    )
            case PatchMetadata(pod=pod, annotations=annotations):
                self.context.journaled(
                    "patch-metadata",
                    pod.uid,
                    None,
                    lambda: self.kube.pods.patch_annotations(pod.namespace, pod.name, annotations),
                )
            case FinalizePod(pod=pod, row=row, status=final):
                if final is not None:
                    # The terminal phase first: a delete held by finalizers must not leave
                    # the pod showing Running.
                    self.context.journaled(
                        "patch-status",
                        pod.uid,
                        None,
                        lambda: self.kube.pods.patch_status(pod.namespace, pod.name, final),
                    )
                self.context.journaled(
                    "finalize-pod",
                    pod.uid,
                    None,
                    lambda: self.kube.pods.delete(pod.namespace, pod.name, pod.uid),
                )
                crashpoints.reached("after-finalize")
                if row is not None:
                    self.context.writes.save_row(row)
                self.context.decided(
                    "finalize",
                    pod,
                    row.instance_id if row else None,
                    "deleted, and its instance is gone",
                )
            case Bind(pod=pod, node_name=node, detail=detail):
                self.context.journaled(
                    "bind",
                    pod.uid,
                    None,
                    lambda: self.kube.pods.bind(pod.namespace, pod.name, pod.uid, node),
                )
                self.context.event(pod, Notice.OFFLOADED, f"bound to {node}: {detail}")
                self.context.decided("bind", pod, None, f"to {node}: {detail}")
            case Event(pod=pod, reason=reason, message=message, warning=warning):
                self.context.event(pod, reason, message, warning)
            case _:
                self._steps_for(action).apply(action)

    def _steps_for(self, action: Action) -> Steps:
        found = next((steps for steps in self._steps if isinstance(action, steps.actions)), None)
        if found is None:
            raise LookupError(f"no resource carries out {type(action).__name__}")
        return found

    def _report_failure(self, action: Action, exc: Exception) -> None:
        pod = getattr(action, "pod", None)
        if isinstance(action, SaveRow | DeleteRow | Event) or pod is None:
            return
        try:
            self.writes.note_error(pod.uid, f"{type(action).__name__}: {exc}", self.clock())
        except Exception:
            log.exception("could not note the failure on the row of %s", pod)


_EXPECTED = (runpod_errors.RunPodError, kube_errors.KubeError, StepRefused)


def _subject(action: Action) -> str:
    subject = getattr(action, "subject", None)
    if subject is not None:
        return str(subject)
    pod = getattr(action, "pod", None)
    if pod is not None:
        return str(pod)
    claim = getattr(action, "claim", None)
    if claim is not None:
        return f"claim {claim}"
    return str(getattr(action, "instance_id", None) or getattr(action, "pod_uid", "?"))
