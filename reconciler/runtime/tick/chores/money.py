"""The tick's money chores (`runtime/tick/money/`): the spend caps' reads of a tick that may
create, the hourly billing reads and their saving, the ghost-charge audit and the
clusters billed after their DELETE (docs/architecture.md §3, "Money")."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.actions import Action, Create
from reconciler.core.config import Settings
from reconciler.core.logs.starting import starting
from reconciler.core.plan.observation import Observed
from reconciler.core.pods.ownership import Ownership
from reconciler.runtime.tick.chores.base import Chore, keep
from reconciler.runtime.tick.money import billing, charge_audit
from reconciler.runtime.tick.resources.base import Resource, Sighting
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)


class MoneyChore(Chore):
    def __init__(
        self,
        settings: Settings,
        runpod: RunPodClient,
        kube: KubeClient,
        store: Store,
        resources: Sequence[Resource],
    ) -> None:
        self.settings, self.runpod, self.kube, self.store = settings, runpod, kube, store
        self.resources = resources
        """Read for what they keep that the pod list does not show (the engine's list)."""
        self.namespace_caps = billing.NamespaceCapsCache()
        self.resource_billing = billing.ResourceBilling()

    def observe(self, sighting: Sighting) -> Observed:
        """The caps of the namespaces of pods about to be created, and what the resources
        keep costs per hour: no read when nothing is about to be created."""
        now, creating = sighting.now, sighting.creating
        caps = self.namespace_caps.get(
            self.kube, (p["metadata"].get("namespace", "default") for p in creating), now
        )
        standing_spend = self._standing_spend(now) if creating else {}
        return Observed(namespace_caps=caps, standing_spend=standing_spend)

    def _standing_spend(self, now: datetime) -> dict[str | None, float]:
        """What the resources keep that the pod list does not show costs per hour, by
        namespace, for the caps of a tick that may create."""
        found: dict[str | None, float] = {}
        for resource in self.resources:
            for namespace, usd in resource.standing_spend(now).items():
                found[namespace] = found.get(namespace, 0.0) + usd
        return found

    def observed(self, report: TickReport, owners: Ownership) -> None:
        report.resource_billing = self._read_resource_billing(report.started_at)

    def _read_resource_billing(self, now: datetime) -> list[billing.ResourceBillingRead]:
        try:
            return self.resource_billing.read(self._routes(), self.store, self.settings, now)
        except Exception as exc:  # derived data: an unreadable store blocks no action
            log.error("could not read what billing was read before: %s", exc, exc_info=True)
            return []

    def _routes(self) -> list[billing.BillingRoute]:
        """How the resources billed apart from instances are billed (their `billing`)."""
        return [route for r in self.resources if (route := r.billing()) is not None]

    def before_apply(self, report: TickReport) -> None:
        """Billing, volumes' and clusters' billing and the caps read, into the store."""
        now = report.started_at
        reads = report.resource_billing
        keep(
            report,
            "billing",
            lambda: billing.save_billing(self.store, self.settings, report.billing, now),
        )
        keep(
            report,
            "volume and cluster billing",
            lambda: billing.save_resource_billing(self.store, self.settings, reads, now),
        )
        keep(report, "namespace caps", lambda: self.namespace_caps.save(self.store, now))

    def after_pods(self, report: TickReport, run: Callable[[Sequence[Action]], None]) -> None:
        """The ghost-charge audit, then the clusters billed after their DELETE, deleted
        again."""
        if report.observation is not None:
            self._audit_charges(report)
        leaks = [leak for read in report.resource_billing for leak in read.leaks]
        if leaks:
            run(leaks)

    def _audit_charges(self, report: TickReport) -> None:
        """The hourly ghost-charge audit (`runtime/tick/money/charge_audit.py`), on a quiet
        tick: no create of anything billed by the hour planned (an instance's, or one a
        billing route names) and no instance starting (their reads come first), unless
        it has been put off for hours."""
        observation = report.observation
        assert observation is not None
        now = report.started_at
        creates: tuple[type[Action], ...] = (
            Create,
            *(c for route in self._routes() for c in route.creates),
        )
        busy = any(isinstance(a, creates) for a in report.actions)
        quiet = not busy and not starting(observation.pods, observation.instances, observation.rows)
        routes = self._routes()
        read = charge_audit.charges_read(report.billing, report.resource_billing, now, routes)
        report.ghost_charges = charge_audit.audit(
            self.runpod, self.kube, self.store, observation, read, now, routes, quiet=quiet
        )
