"""Instances' steps: a pod's instance made, adopted, tagged again and terminated
(the planner decides; docs/architecture.md §4's create and terminate protocols), each
RunPod call journaled.

The steps decide nothing the planner did not, except what only an answer can tell:
which create candidate RunPod accepted, and whether to stop creating for this tick
(what each refusal means is `core.capacity.refusals`'s table, which the planner reads too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.core.actions import (
    Action,
    Adopt,
    Create,
    DeleteRow,
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
from reconciler.core.mapping import MappingState
from reconciler.core.reasons import Notice, PodReason, TerminateReason
from reconciler.core.resources import registries as registry_rule
from reconciler.core.translate.annotations import CONTAINER_REGISTRY_AUTH_ID
from reconciler.core.translate.status import metadata_annotations
from reconciler.runtime.tick import crashpoints
from reconciler.runtime.tick.refusal_kinds import refusal_kind
from reconciler.runtime.tick.resources.base import Deferred
from reconciler.runtime.tick.resources.registries import RegistrySteps
from reconciler.runtime.tick.run_context import RunContext

log = logging.getLogger(__name__)


class _CreatesSkipped(Exception):
    """This pod's create was ended before RunPod heard of it (reason already recorded)."""


class InstanceSteps:
    actions: tuple[type[Action], ...] = (SaveRow, DeleteRow, Create, Adopt, Terminate, RestoreTags)

    def __init__(
        self,
        context: RunContext,
        registries: Callable[[], RegistrySteps],
        stock: StockMemory,
        keep_log: Callable[[PodRef, str], None] | None = None,
        naming: registry_rule.Naming | None = None,
    ) -> None:
        """`registries` gives this run's credentials, which a create pulls with; `naming`
        which of them a pod may name."""
        self.context, self._registries, self.stock = context, registries, stock
        self.naming = naming or registry_rule.Naming("", ())
        self.keep_log = keep_log
        self.refusals = 0
        """Creates RunPod refused this run for want of stock."""
        self._created: list[tuple[PodRef, Instance]] = []

    def apply(self, action: Action) -> None:
        match action:
            case SaveRow(row=row):
                self.context.writes.save_row(row)
            case DeleteRow(pod_uid=uid):
                self.context.writes.delete_row(uid)
            case Create():
                self._before_create()
                self._create(action)
            case Adopt(pod=pod, instance=instance, row=row):
                self.context.writes.save_row(row)
                self.context.decided(
                    "adopt",
                    pod,
                    instance.id,
                    "an owned instance found by its tags",
                    instance.cost_per_hr,
                )
            case Terminate():
                if self._end_unrecorded(action):
                    raise Deferred
                self._terminate(action)
            case RestoreTags(instance_id=instance_id, env=env, pod=tagged):
                runpod = self.context.runpod
                self.context.journaled(
                    "restore-tags",
                    tagged.uid if tagged else None,
                    instance_id,
                    lambda: runpod.instances.update_env(instance_id, env),
                )
                log.warning(
                    "put the owner tags back on instance %s (its env was replaced)", instance_id
                )

    def unrecorded(self) -> int:
        """Each answered create's id onto its pod (`--once`): the Kubernetes objects, not
        our database, are what the next writer reads. One not written there counts."""
        unrecorded = 0
        for pod, instance in self._created:
            if not self.context.annotate_created or not self._annotate(pod, instance):
                unrecorded += 1
        return unrecorded

    def _before_create(self) -> None:
        """Past the tick's deadline, or while a dead writer's create may still land
        (`runtime/process/writer_lease.py`), the create waits for a later tick with nothing
        committed: the next tick plans it again."""
        if self.context.runpod.past_deadline:
            self.context.deferred += 1
            self.context.past_deadline = True
            raise Deferred
        if self.context.creates_held():
            self.context.deferred += 1
            raise Deferred

    def _end_unrecorded(self, action: Terminate) -> bool:
        """Whether `action` must wait: the pod's end it follows was not written."""
        if not action.after_pod_end or action.pod is None:
            return False
        if action.pod.uid not in self.context.status_failed:
            return False
        log.warning(
            "not terminating instance %s of %s yet: its end is not on the pod (the status "
            "patch failed); the next tick patches it again, then terminates",
            action.instance_id,
            action.pod,
        )
        return True

    def _keep_log(self, pod: PodRef, instance_id: str) -> None:
        """One RunPod request, once per pod: its last lines into the store, RunPod's own
        lines about the instance (image pull, start-up, errors) onto the pod as Events."""
        try:
            if self.keep_log is not None:
                self.keep_log(pod, instance_id)
        except Exception:  # a log is worth less than the DELETE that must follow
            log.warning("could not keep the log of %s", pod, exc_info=True)

    def _create(self, action: Create) -> None:
        budget = self.context.runpod.rate_budget
        if not self.context.creates_stopped and budget is not None and budget <= 0:
            # Not sleeping until the window resets inside this tick: the next tick comes
            # at the reset and divides the fresh window among the reconcilers on the key.
            self.context.creates_stopped = "our share of RunPod's rate limit is spent for now"
        if self.context.creates_stopped:
            log.info("not creating for %s this tick: %s", action.pod, self.context.creates_stopped)
            self.context.deferred += 1
            return
        try:
            # Before the intent: nothing of it can create an instance, and a failure
            # here leaves the row as it was instead of `creating`.
            candidates = self._with_registry_auth(action)
        except _CreatesSkipped:
            return
        self.context.writes.save_row(action.row)  # the intent: committed before RunPod hears of it
        instance = self._first_accepted(action, candidates)
        if instance is None:
            return
        crashpoints.reached("after-create")
        # Committed with a later write: lost in a crash, the instance is adopted by its
        # tags, as after a create whose answer was lost.
        self.context.writes.save_row(
            action.row.running_on(instance).changed(updated_at=self.context.clock())
        )
        crashpoints.reached("after-id-write")
        self._created.append((action.pod, instance))
        size = (
            f"{instance.cpu_flavor_id} with {instance.vcpu_count} vCPUs"
            if instance.cpu_flavor_id
            else f"{instance.gpu_type_id} x{instance.gpu_count}"
        )
        placement = f"{size} in {instance.datacenter_id or 'any data center'}"
        self.context.event(
            action.pod,
            Notice.CREATED_INSTANCE,
            f"created RunPod instance {instance.id} ({placement}, ${instance.cost_per_hr:.2f}/h)",
        )
        self.context.decided("create", action.pod, instance.id, placement, instance.cost_per_hr)

    def _first_accepted(
        self, action: Create, candidates: tuple[CreateRequest, ...]
    ) -> Instance | None:
        """Try the ranked candidates, past the places RunPod refused lately (an earlier pod
        of this tick included), and do what `core.capacity.refusals` says of each refusal."""
        refused: list[str] = []
        for candidate in usable(candidates, self.stock.active(self.context.clock())):
            try:
                instance = self._create_one(action, candidate)
            except runpod_errors.RunPodError as exc:
                kind = refusal_kind(exc, candidate.template_id)
                if kind is None:
                    # 5xx or no answer: the row stays `creating`, and the next ticks
                    # adopt the instance if it was made after all.
                    self.context.in_doubt += 1
                    raise
                refusal = REFUSALS[kind]
                message = refusal.message.format(
                    error=exc, detail=exc.detail or exc, template=candidate.template_id
                )
                if refusal.out_of_stock:
                    self.stock.refused(candidate, self.context.clock())
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
            self.context.creates_stopped = message
        if refusal.reason is None:  # rate limited: nothing wrong with the pod, try next tick
            self.context.writes.save_row(
                action.row.changed(state=MappingState.PENDING, attempt_id=None)
            )
        elif refusal.next is Next.FAIL:
            self._give_up(action, refusal.reason, message)
        else:
            self._wait(action, refusal.reason, message)

    def _annotate(self, pod: PodRef, instance: Instance) -> bool:
        """The new instance's id onto its pod before the run ends, not at the next tick's
        mirror: a writer after us that lost our rows (or has its own) finds it there,
        even while RunPod's list does not show the instance yet. True if written."""
        try:
            self.context.journaled(
                "patch-metadata",
                pod.uid,
                None,
                lambda: self.context.kube.pods.patch_annotations(
                    pod.namespace, pod.name, dict(metadata_annotations(instance))
                ),
            )
        except kube_errors.KubeError as exc:
            log.warning("could not write instance %s onto %s: %s", instance.id, pod, exc)
            return False
        return True

    def _create_one(self, action: Create, candidate: CreateRequest) -> Instance:
        result = self.context.journaled(
            "create",
            action.pod.uid,
            None,
            lambda: self.context.runpod.instances.create(candidate),
            durable_at="after-intent",
            made=lambda instance: instance.id,
        )
        assert isinstance(result, Instance)
        return result

    def _wait(self, action: Create, reason: PodReason, message: str) -> None:
        """Nothing was created: back to pending, with a reason the planner will show."""
        self._no_instance(action, MappingState.PENDING, reason, message)
        if action.row.reason != reason:
            self.context.event(action.pod, reason, message, warning=True)

    def _give_up(self, action: Create, reason: PodReason, message: str) -> None:
        self._no_instance(action, MappingState.FAILED, reason, message)
        self.context.event(action.pod, reason, message, warning=True)

    def _no_instance(
        self, action: Create, state: MappingState, reason: PodReason, message: str
    ) -> None:
        """The create's row ends its attempt without an instance, saying why."""
        self.context.writes.save_row(
            action.row.changed(
                state=state,
                attempt_id=None,
                reason=reason,
                last_error=message,
                updated_at=self.context.clock(),
            )
        )

    def _with_registry_auth(self, action: Create) -> tuple[CreateRequest, ...]:
        """The candidates with the id of the registry credential they pull with: ours,
        which an `EnsureRegistryAuth` earlier in the plan found or made, or one the pod
        names by id, checked to exist (one list per tick, shared)."""
        if action.registry_name is not None:
            registry_id = self._registries().id_for(action.registry_name)
            return tuple(replace(c, registry_auth_id=registry_id) for c in action.candidates)
        named = action.candidates[0].registry_auth_id
        if not named:
            return action.candidates
        listed = self._registries().ids()
        if named not in listed.values() and named not in self.naming.allowed_ids:
            self._wait(
                action,
                REFUSALS[RefusalKind.ID_NOT_FOUND].reason or PodReason.INVALID_ANNOTATION,
                f"annotation {CONTAINER_REGISTRY_AUTH_ID}: RunPod has no registry "
                f"credential {named!r}",
            )
            raise _CreatesSkipped
        refused = self.naming.refusal(named, listed, action.own_registry_names)
        if refused is not None:
            message = f"annotation {CONTAINER_REGISTRY_AUTH_ID}: {refused}"
            self._wait(action, PodReason.FOREIGN_ID, message)
            raise _CreatesSkipped
        return action.candidates

    # --- terminate --------------------------------------------------------------------

    def _terminate(self, action: Terminate) -> None:
        if action.reason is TerminateReason.START_FAILED and action.row is not None:
            # No create of any pod goes there again for a while (core.capacity.stock).
            row = action.row
            self.stock.start_failed(row.gpu_type_id or "", row.datacenter_id, self.context.clock())
        if action.row is not None:
            # The instance's end, as far as we decide it: the leak audit and the cost
            # report count from here, not from when a later tick saw it gone.
            now = self.context.clock()
            self.context.writes.save_row(
                action.row.changed(updated_at=now, ended_at=action.row.ended_at or now)
            )
        pod_uid = action.pod.uid if action.pod else (action.row.pod_uid if action.row else None)
        if action.keeps_log and action.pod is not None:
            self.context.writes.commit()  # the kept log is stored beside the pod's row
            self._keep_log(action.pod, action.instance_id)
        self.context.journaled(
            "terminate",
            pod_uid,
            action.instance_id,
            lambda: self.context.runpod.instances.delete(action.instance_id),
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
        self.context.decided(
            "terminate",
            action.pod,
            action.instance_id,
            action.detail,
            action.row.cost_per_hr if action.row else None,
        )
