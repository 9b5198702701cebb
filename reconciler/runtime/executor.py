"""Carries out a plan, one action at a time, following the protocol of
docs/architecture.md §4.

Every side effect is journaled: a row is opened before the call and closed after it.
One action failing never stops the others; it becomes a log line, a journal outcome,
a row note and (where a user must know) an Event on the pod. The executor decides
nothing the planner did not, except what only the answer of a call can tell: which
create candidate RunPod accepted, and whether to stop creating for this tick (what each
refusal means is `reconciler.core.capacity.refusals`'s table, which the planner reads too).

Row and journal writes are gathered in one `WriteBatch` for the run and committed where
the protocol needs them durable (`_journaled(..., durable_at=...)`: a create's intent
and journal row before the POST, a terminate's row and journal row before the DELETE)
and once at the end of the run; the batch's docstring argues why nothing else needs to
be committed sooner.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.actions import (
    Action,
    Adopt,
    Bind,
    Create,
    DeleteRow,
    Event,
    FinalizePod,
    PatchMetadata,
    PatchStatus,
    PodRef,
    RestoreTags,
    SaveRow,
    Terminate,
)
from reconciler.core.capacity.refusals import (
    REFUSALS,
    REFUSED_EVERYWHERE,
    Next,
    Refusal,
    RefusalKind,
)
from reconciler.core.capacity.stock import StockMemory, usable
from reconciler.core.domain import CreateRequest, Instance
from reconciler.core.mapping import MappingRecord, MappingState
from reconciler.core.reasons import Notice, PodReason
from reconciler.core.translate.annotations import CONTAINER_REGISTRY_AUTH_ID
from reconciler.core.translate.status import metadata_annotations
from reconciler.runtime import crashpoints
from reconciler.runtime.journal import Journal
from reconciler.runtime.refusal_kinds import refusal_kind
from reconciler.runtime.resources.base import Resource, Steps
from reconciler.runtime.resources.registries import RegistryMissing, RegistrySteps
from reconciler.runtime.writer_lease import WriterLost

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    applied: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    done: list[Action] = field(default_factory=list)


class _CreatesSkipped(Exception):
    """This pod's create was ended before RunPod heard of it (reason already recorded)."""


class Executor:
    def __init__(
        self,
        runpod: RunPodClient,
        kube: KubeClient,
        store: Store,
        clock: Callable[[], datetime],
        tick_id: Callable[[], int],
        stock: StockMemory | None = None,
        keep_log: Callable[[PodRef, str], None] | None = None,
        before_action: Callable[[], None] = lambda: None,
        creates_held: Callable[[], bool] = lambda: False,
        owner_id: str = "",
        unrecorded_creates: Callable[[int], None] = lambda _count: None,
        annotate_created: bool = False,
        resources: Sequence[Resource] = (),
    ) -> None:
        """`resources` are the cloud resources besides instances, each of
        which carries out its own actions (`runtime/resources/`)."""
        self.runpod, self.kube, self.clock = runpod, kube, clock
        self.writes = store.batch()
        self.journal = Journal(
            runpod, kube, self.writes, clock, tick_id, creates_held, annotate_created
        )
        self._steps = [resource.steps(self.journal) for resource in resources]
        self.keep_log = keep_log
        self._owner_id = owner_id
        self.stock = stock if stock is not None else StockMemory()
        self.refusals = 0
        """Creates RunPod refused this run for want of stock."""
        # Keeps the node's writer Lease; raises WriterLost, which ends the run.
        self._before_action = before_action
        # Told at the end of the run how many of its creates may have made an instance
        # whose id is not on its pod: the writer Lease, released now, then passes a hold
        # on creates to whoever takes it next (runtime/writer_lease.py).
        self._unrecorded_creates = unrecorded_creates
        self._created: list[tuple[PodRef, Instance]] = []

    @property
    def deferred(self) -> int:
        """Creates left for a later tick: creates stopped, held, or past the deadline."""
        return self.journal.deferred

    @property
    def past_deadline(self) -> bool:
        """Whether creates were left over because the tick's deadline had passed."""
        return self.journal.past_deadline

    def steps(self, kind: type[object]) -> object:
        """This run's steps of one resource, by type."""
        found = next((steps for steps in self._steps if isinstance(steps, kind)), None)
        if found is None:
            raise LookupError(f"no {kind.__name__} registered")
        return found

    def run(self, actions: Iterable[Action]) -> Outcome:
        outcome = Outcome()
        try:
            for action in actions:
                self._run_one(action, outcome)
        except WriterLost:
            self._commit_rest(outcome)  # what was done is recorded, as it always was
            raise
        self._record_created()
        self._commit_rest(outcome)
        return outcome

    def _record_created(self) -> None:
        """Each answered create's id onto its pods (`--once`): the Kubernetes objects,
        not our database, are what the next writer reads. One not written there, or a
        create in doubt, passes a hold on with the Lease (`runtime/writer_lease.py`)."""
        unrecorded = 0
        for pod, instance in self._created:
            if not self.journal.annotate_created or not self._annotate(pod, instance):
                unrecorded += 1
        unrecorded += sum(steps.unrecorded() for steps in self._steps)
        self._unrecorded_creates(self.journal.in_doubt + unrecorded)

    def _run_one(self, action: Action, outcome: Outcome) -> None:
        kind = type(action).__name__
        self._before_action()
        if isinstance(action, Create) and self.runpod.past_deadline:
            self.journal.deferred += 1
            self.journal.past_deadline = True
            return  # nothing committed: the next tick plans this create again
        if isinstance(action, Create) and self.journal.creates_held():
            self.journal.deferred += 1
            return  # a dead writer's create may still land: see runtime/writer_lease.py
        if isinstance(action, Terminate) and self._end_unrecorded(action):
            return
        try:
            self._apply(action)
            outcome.applied[kind] += 1
            outcome.done.append(action)
        except WriterLost:
            raise
        except Exception as exc:  # one action never stops the others
            outcome.failed[kind] += 1
            outcome.errors.append(f"{kind} {_subject(action)}: {exc}")
            log.warning(
                "%s for %s failed: %s",
                kind,
                _subject(action),
                exc,
                exc_info=not isinstance(exc, _EXPECTED),
            )
            self._report_failure(action, exc)
            if isinstance(action, PatchStatus):
                self.journal.status_failed.add(action.pod.uid)

    def _end_unrecorded(self, action: Terminate) -> bool:
        """Whether `action` must wait: the pod's end it follows was not written."""
        if not action.after_pod_end or action.pod is None:
            return False
        if action.pod.uid not in self.journal.status_failed:
            return False
        log.warning(
            "not terminating instance %s of %s yet: its end is not on the pod (the status "
            "patch failed); the next tick patches it again, then terminates",
            action.instance_id,
            action.pod,
        )
        return True

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
            case SaveRow(row=row):
                self.writes.save_row(row)
            case DeleteRow(pod_uid=uid):
                self.writes.delete_row(uid)
            case Create():
                self._create(action)
            case Adopt(pod=pod, instance=instance, row=row):
                self.writes.save_row(row)
                self.journal.decided(
                    "adopt",
                    pod,
                    instance.id,
                    "an owned instance found by its tags",
                    instance.cost_per_hr,
                )
            case Terminate():
                self._terminate(action)
            case RestoreTags(instance_id=instance_id, env=env, pod=tagged):
                self.journal.journaled(
                    "restore-tags",
                    tagged.uid if tagged else None,
                    instance_id,
                    lambda: self.runpod.instances.update_env(instance_id, env),
                )
                log.warning(
                    "put the owner tags back on instance %s (its env was replaced)", instance_id
                )
            case PatchStatus(pod=pod, status=status, row=row, annotations=annotations):
                self.journal.journaled(
                    "patch-status",
                    pod.uid,
                    None,
                    lambda: self.kube.pods.patch_status(
                        pod.namespace, pod.name, status, annotations
                    ),
                )
                crashpoints.reached("after-status-patch")
                if row is not None:
                    self.writes.save_row(row)
                if status.get("phase") == "Failed":
                    self.journal.decided(
                        "fail",
                        pod,
                        row.instance_id if row else None,
                        f"{status.get('reason')}: {status.get('message')}",
                        row.cost_per_hr if row else None,
                    )
            case PatchMetadata(pod=pod, annotations=annotations):
                self.journal.journaled(
                    "patch-metadata",
                    pod.uid,
                    None,
                    lambda: self.kube.pods.patch_annotations(pod.namespace, pod.name, annotations),
                )
            case FinalizePod(pod=pod, row=row, status=final):
                if final is not None:
                    # The terminal phase first: a delete held by finalizers must not leave
                    # the pod showing Running.
                    self.journal.journaled(
                        "patch-status",
                        pod.uid,
                        None,
                        lambda: self.kube.pods.patch_status(pod.namespace, pod.name, final),
                    )
                self.journal.journaled(
                    "finalize-pod",
                    pod.uid,
                    None,
                    lambda: self.kube.pods.delete(pod.namespace, pod.name, pod.uid),
                )
                crashpoints.reached("after-finalize")
                if row is not None:
                    self.writes.save_row(row)
                self.journal.decided(
                    "finalize",
                    pod,
                    row.instance_id if row else None,
                    "deleted, and its instance is gone",
                )
            case Bind(pod=pod, node_name=node, detail=detail):
                self.journal.journaled(
                    "bind",
                    pod.uid,
                    None,
                    lambda: self.kube.pods.bind(pod.namespace, pod.name, pod.uid, node),
                )
                self.journal.event(pod, Notice.OFFLOADED, f"bound to {node}: {detail}")
                self.journal.decided("bind", pod, None, f"to {node}: {detail}")
            case Event(pod=pod, reason=reason, message=message, warning=warning):
                self.journal.event(pod, reason, message, warning)
            case _:
                self._steps_for(action).apply(action)

    # --- journal ----------------------------------------------------------------------

    def _keep_log(self, pod: PodRef, instance_id: str) -> None:
        """One RunPod request, once per pod: its last lines into the store, RunPod's own
        lines about the instance (image pull, start-up, errors) onto the pod as Events."""
        try:
            if self.keep_log is not None:
                self.keep_log(pod, instance_id)
        except Exception:  # a log is worth less than the DELETE that must follow
            log.warning("could not keep the log of %s", pod, exc_info=True)

    def _report_failure(self, action: Action, exc: Exception) -> None:
        pod = getattr(action, "pod", None)
        if isinstance(action, SaveRow | DeleteRow | Event) or pod is None:
            return
        try:
            self.writes.note_error(pod.uid, f"{type(action).__name__}: {exc}", self.clock())
        except Exception:
            log.exception("could not note the failure on the row of %s", pod)

    # --- create -----------------------------------------------------------------------

    def _create(self, action: Create) -> None:
        budget = self.runpod.rate_budget
        if not self.journal.creates_stopped and budget is not None and budget <= 0:
            # Not sleeping until the window resets inside this tick: the next tick comes
            # at the reset and divides the fresh window among the reconcilers on the key.
            self.journal.creates_stopped = "our share of RunPod's rate limit is spent for now"
        if self.journal.creates_stopped:
            log.info("not creating for %s this tick: %s", action.pod, self.journal.creates_stopped)
            self.journal.deferred += 1
            return
        try:
            # Before the intent: nothing of it can create an instance, and a failure
            # here leaves the row as it was instead of `creating`.
            candidates = self._with_registry_auth(action)
        except _CreatesSkipped:
            return
        self.writes.save_row(action.row)  # the intent: committed before RunPod hears of it
        instance = self._first_accepted(action, candidates)
        if instance is None:
            return
        crashpoints.reached("after-create")
        # Committed with a later write: lost in a crash, the instance is adopted by its
        # tags, as after a create whose answer was lost.
        self.writes.save_row(_created_row(action.row, instance, self.clock()))
        crashpoints.reached("after-id-write")
        self._created.append((action.pod, instance))
        size = (
            f"{instance.cpu_flavor_id} with {instance.vcpu_count} vCPUs"
            if instance.cpu_flavor_id
            else f"{instance.gpu_type_id} x{instance.gpu_count}"
        )
        placement = f"{size} in {instance.datacenter_id or 'any data center'}"
        self.journal.event(
            action.pod,
            Notice.CREATED_INSTANCE,
            f"created RunPod instance {instance.id} ({placement}, ${instance.cost_per_hr:.2f}/h)",
        )
        self.journal.decided("create", action.pod, instance.id, placement, instance.cost_per_hr)

    def _first_accepted(
        self, action: Create, candidates: tuple[CreateRequest, ...]
    ) -> Instance | None:
        """Try the ranked candidates, past the places RunPod refused lately (an earlier pod
        of this tick included), and do what `core.capacity.refusals` says of each refusal."""
        refused: list[str] = []
        for candidate in usable(candidates, self.stock.active(self.clock())):
            try:
                instance = self._create_one(action, candidate)
            except runpod_errors.RunPodError as exc:
                kind = refusal_kind(exc, candidate.template_id)
                if kind is None:
                    # 5xx or no answer: the row stays `creating`, and the next ticks
                    # adopt the instance if it was made after all.
                    self.journal.in_doubt += 1
                    raise
                refusal = REFUSALS[kind]
                message = refusal.message.format(
                    error=exc, detail=exc.detail or exc, template=candidate.template_id
                )
                if refusal.out_of_stock:
                    self.stock.refused(candidate, self.clock())
                    self.refusals += 1
                if refusal.next is Next.TRY_NEXT:
                    refused.append(f"{candidate.offer_id}: {message}")
                    continue
                self._refused(action, refusal, message)
                if refusal.next is Next.FAIL:
                    raise
                return None
            self.stock.accepted(candidate.offer_id, candidate.cloud)
            return instance
        self._wait(
            action,
            PodReason.CAPACITY_UNAVAILABLE,
            "no GPU type that fits this pod could be created: "
            + ("; ".join(refused) or REFUSED_EVERYWHERE),
        )
        return None

    def _refused(self, action: Create, refusal: Refusal, message: str) -> None:
        if refusal.next is Next.STOP_CREATES:
            self.journal.creates_stopped = message
        if refusal.reason is None:  # rate limited: nothing wrong with the pod, try next tick
            self.writes.save_row(action.row.changed(state=MappingState.PENDING, attempt_id=None))
        elif refusal.next is Next.FAIL:
            self._give_up(action, refusal.reason, message)
        else:
            self._wait(action, refusal.reason, message)

    def _annotate(self, pod: PodRef, instance: Instance) -> bool:
        """The new instance's id onto its pod before the run ends, not at the next tick's
        mirror: a writer after us that lost our rows (or has its own) finds it there,
        even while RunPod's list does not show the instance yet. True if written."""
        try:
            self.journal.journaled(
                "patch-metadata",
                pod.uid,
                None,
                lambda: self.kube.pods.patch_annotations(
                    pod.namespace, pod.name, dict(metadata_annotations(instance))
                ),
            )
        except kube_errors.KubeError as exc:
            log.warning("could not write instance %s onto %s: %s", instance.id, pod, exc)
            return False
        return True

    def _create_one(self, action: Create, candidate: CreateRequest) -> Instance:
        result = self.journal.journaled(
            "create",
            action.pod.uid,
            None,
            lambda: self.runpod.instances.create(candidate),
            durable_at="after-intent",
        )
        assert isinstance(result, Instance)
        return result

    def _wait(self, action: Create, reason: PodReason, message: str) -> None:
        """Nothing was created: back to pending, with a reason the planner will show."""
        self.writes.save_row(
            action.row.changed(
                state=MappingState.PENDING,
                attempt_id=None,
                reason=reason,
                last_error=message,
                updated_at=self.clock(),
            )
        )
        if action.row.reason != reason:
            self.journal.event(action.pod, reason, message, warning=True)

    def _give_up(self, action: Create, reason: PodReason, message: str) -> None:
        self.writes.save_row(
            action.row.changed(
                state=MappingState.FAILED,
                attempt_id=None,
                reason=reason,
                last_error=message,
                updated_at=self.clock(),
            )
        )
        self.journal.event(action.pod, reason, message, warning=True)

    @property
    def _registries(self) -> RegistrySteps:
        """The credentials an instance pulls with: this run's registry steps."""
        found = self.steps(RegistrySteps)
        assert isinstance(found, RegistrySteps)
        return found

    def _steps_for(self, action: Action) -> Steps:
        found = next((steps for steps in self._steps if isinstance(action, steps.actions)), None)
        if found is None:
            raise LookupError(f"no resource carries out {type(action).__name__}")
        return found

    def _with_registry_auth(self, action: Create) -> tuple[CreateRequest, ...]:
        """The candidates with the id of the registry credential they pull with: ours,
        which an `EnsureRegistryAuth` earlier in the plan found or made, or one the pod
        names by id, checked to exist (one list per tick, shared)."""
        if action.registry_name is not None:
            registry_id = self._registries.id_for(action.registry_name)
            return tuple(replace(c, registry_auth_id=registry_id) for c in action.candidates)
        named = action.candidates[0].registry_auth_id
        if named and named not in self._registries.ids().values():
            self._wait(
                action,
                REFUSALS[RefusalKind.ID_NOT_FOUND].reason or PodReason.INVALID_ANNOTATION,
                f"annotation {CONTAINER_REGISTRY_AUTH_ID}: RunPod has no registry "
                f"credential {named!r}",
            )
            raise _CreatesSkipped
        return action.candidates

    # --- terminate --------------------------------------------------------------------

    def _terminate(self, action: Terminate) -> None:
        if action.row is not None:
            # The instance's end, as far as we decide it: the leak audit and the cost
            # report count from here, not from when a later tick saw it gone.
            now = self.clock()
            self.writes.save_row(
                action.row.changed(updated_at=now, ended_at=action.row.ended_at or now)
            )
        pod_uid = action.pod.uid if action.pod else (action.row.pod_uid if action.row else None)
        if action.keeps_log and action.pod is not None:
            self.writes.commit()  # the kept log is stored beside the pod's row
            self._keep_log(action.pod, action.instance_id)
        self.journal.journaled(
            "terminate",
            pod_uid,
            action.instance_id,
            lambda: self.runpod.instances.delete(action.instance_id),
            durable_at="after-terminating",
        )
        crashpoints.reached("after-delete")
        if action.leaked_seconds:
            log.error(
                "LEAK: RunPod billed instance %s for %.0f s after its pod ended; "
                "terminated it again",
                action.instance_id,
                action.leaked_seconds,
            )
        self.journal.decided(
            "terminate",
            action.pod,
            action.instance_id,
            action.detail,
            action.row.cost_per_hr if action.row else None,
        )


_EXPECTED = (runpod_errors.RunPodError, kube_errors.KubeError, RegistryMissing)


def _created_row(intent: MappingRecord, instance: Instance, now: datetime) -> MappingRecord:
    return intent.changed(
        state=MappingState.RUNNING,
        instance_id=instance.id,
        instance_name=instance.name,
        gpu_type_id=instance.gpu_type_id or instance.cpu_flavor_id,
        datacenter_id=instance.datacenter_id,
        cost_per_hr=instance.cost_per_hr,
        last_instance_status=instance.status.value,
        reason=None,
        last_error=None,
        updated_at=now,
    )


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
