"""Registry credentials at RunPod: stored before the create that pulls with one, and
collected once no instance uses it (`core.resources.registries` decides which), each
call journaled (docs/architecture.md §3, "Cloud resources")."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.core.actions import Action, DeleteRegistryAuth, EnsureRegistryAuth, Terminate
from reconciler.core.domain import RegistryAuth
from reconciler.core.plan.observation import Observation
from reconciler.core.resources import registries
from reconciler.runtime.tick import crashpoints
from reconciler.runtime.tick.money import billing
from reconciler.runtime.tick.resources.base import AfterPods, Shared, Sighting, StepRefused
from reconciler.runtime.tick.resources.sections import RegistrySection
from reconciler.runtime.tick.run_context import RunContext
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)


class RegistryMissing(StepRefused):
    """The credential a create needs is not at RunPod: storing it failed this tick."""


class RegistrySteps:
    actions: tuple[type[Action], ...] = (EnsureRegistryAuth, DeleteRegistryAuth)

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self._ids: dict[str, str] | None = None
        self.used: set[str] = set()
        """Credentials this run's creates chose: not to be collected this tick."""
        self.deleted: list[str] = []

    def apply(self, action: Action) -> None:
        match action:
            case EnsureRegistryAuth():
                self._ensure(action)
            case DeleteRegistryAuth():
                self._delete(action)

    def unrecorded(self) -> int:
        return 0  # a credential is found by its name: nothing to write anywhere

    def id_for(self, name: str) -> str:
        """The id of our credential `name`, which an `EnsureRegistryAuth` earlier in the
        plan found or made; it is then kept from this tick's collection."""
        registry_id = self.ids().get(name)
        if registry_id is None:
            raise RegistryMissing(f"registry credential {name} could not be stored this tick")
        self.used.add(registry_id)
        return registry_id

    def ids(self) -> dict[str, str]:
        """The account's registry credentials, name to id, listed once per run."""
        if self._ids is None:
            self._ids = {a.name: a.id for a in self.context.runpod.registries.list()}
        return self._ids

    def _ensure(self, action: EnsureRegistryAuth) -> None:
        """Ours when listed under its name (an earlier create whose answer was lost
        included); else made, with the journal row committed before the call."""
        if self.context.creates_wait():
            return  # its create waits for a later tick too
        known = self.ids()
        if action.name in known:
            return
        runpod = self.context.runpod
        created = self.context.journaled(
            "create-registry-auth",
            action.pod.uid,
            None,
            lambda: runpod.registries.create(action.name, action.username, action.password),
            durable_at="after-registry-intent",
            made=lambda auth: auth.id,
        )
        assert isinstance(created, RegistryAuth)
        crashpoints.reached("after-registry-create")
        known[action.name] = created.id
        log.info("stored registry credential %s (%s) for %s", created.id, action.name, action.pod)

    def _delete(self, action: DeleteRegistryAuth) -> None:
        runpod = self.context.runpod
        deleted = self.context.journaled(
            "delete-registry-auth",
            None,
            action.registry_id,
            lambda: runpod.registries.delete(action.registry_id),
            durable_at="after-registry-unused",
        )
        crashpoints.reached("after-registry-delete")
        if deleted:  # False: it was gone already
            self.deleted.append(action.registry_id)
            log.info(
                "deleted registry credential %s (%s): no pod uses it",
                action.registry_id,
                action.name,
            )


class Registries:
    """Registry credentials as a resource of the tick."""

    def __init__(self, shared: Shared) -> None:
        self.runpod, self.owner_id = shared.runpod, shared.settings.owner_id

    def steps(self, context: RunContext) -> RegistrySteps:
        return RegistrySteps(context)

    def plan(self, observation: Observation, now: datetime) -> Sequence[Action]:
        return ()  # the planner plans its actions

    def billing(self) -> billing.BillingRoute | None:
        return None  # billed as instances are: `runtime/tick/money/billing.py`'s pod billing

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        return {}  # RunPod charges nothing for a credential

    def observe(self, sighting: Sighting) -> None:
        """Nothing: a create's credential is found or made by its steps."""

    def planned(self, report: TickReport) -> None:
        """Nothing to tell of the plan."""

    def after_pods(self, tick: AfterPods) -> None:
        """After a tick that ended an instance pulling with one of our credentials:
        delete ours that nothing uses any more. Listing costs a request only then."""
        report, observation = tick.report, tick.report.observation
        if observation is None:
            return
        ended = {a.instance_id for a in report.done if isinstance(a, Terminate)}
        if not any(i.registry_auth_id for i in observation.instances if i.id in ended):
            return
        try:
            auths = self.runpod.registries.list()
        except runpod_errors.RunPodError as exc:
            log.warning("could not list registry credentials: %s", exc)
            return
        steps = tick.steps_of(RegistrySteps)
        left = [i for i in observation.instances if i.id not in ended]
        deletes = registries.collection(auths, left, self.owner_id, keep=steps.used)
        if not deletes:
            return
        tick.run(deletes)
        report.sections[RegistrySection] = RegistrySection(steps.deleted)
