"""Network volumes as a resource of the tick: the provisioner's phase after the pods'
actions (`core.resources.network_volumes` decides), the leak audit
(`core.resources.volume_leaks`) and the storage the spend caps count.

RunPod's volumes are listed only on a tick with a claim to provision, a volume to grow
or to delete, or once the kept list is an hour old; the StorageClasses once per
--catalog-ttl, and again on a tick a pod waits for an unbound claim (a class applied a
moment ago is seen at once); a cluster without one of ours pays no request a tick.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.core.actions import (
    Action,
    ClaimEvent,
    CreateNetworkVolume,
    DeleteNetworkVolume,
    ResizeNetworkVolume,
)
from reconciler.core.domain import KubeObject, RunPodVolume
from reconciler.core.money import attribution, storage_caps
from reconciler.core.money.attribution import Billed
from reconciler.core.plan import hourly_costs
from reconciler.core.plan.observation import Observation
from reconciler.core.plan.situation import Situation
from reconciler.core.pods import podinfo
from reconciler.core.reasons import PodReason
from reconciler.core.resources import network_volumes, storage_prices, volume_leaks, volume_objects
from reconciler.core.translate.offers import first_datacenter
from reconciler.runtime.tick.by_id import read_by_id
from reconciler.runtime.tick.catalog import on_cpu
from reconciler.runtime.tick.money import billing
from reconciler.runtime.tick.resources.base import AfterPods, Shared, Sighting
from reconciler.runtime.tick.resources.sections import VolumeSection
from reconciler.runtime.tick.resources.volume_steps import VolumeSteps
from reconciler.runtime.tick.run_context import RunContext
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)


class Volumes:
    def __init__(self, shared: Shared) -> None:
        self.settings, self.runpod, self.kube = shared.settings, shared.runpod, shared.kube
        self.store, self.attributions = shared.store, shared.attributions
        self.catalog, self.cpu_catalog = shared.catalog, shared.cpu_catalog
        self.namespace_caps = billing.NamespaceCapsCache()
        """The caps of the namespaces whose claims' volumes are about to be made or grown."""
        self._classes: list[KubeObject] = []
        self._classes_read_at: datetime | None = None
        self._claim_warnings: dict[str, str] = {}
        """The warning each claim was last given (by claim UID): said once while it holds."""
        self._storage_spend: dict[str | None, float] | None = None
        """Our network volumes' storage price by namespace, as the provisioner last read
        the PVs; None until it has (read then for the spend caps, once)."""

    def steps(self, context: RunContext) -> VolumeSteps:
        return VolumeSteps(context)

    def observe(self, sighting: Sighting) -> None:
        """Nothing: the provisioner reads the storage after the pods' actions."""

    def planned(self, report: TickReport) -> None:
        """Nothing to tell of the plan."""

    # --- the spend caps ---------------------------------------------------------------

    def plan(self, observation: Observation, now: datetime) -> Sequence[Action]:
        return ()  # the planner plans its actions

    def billing(self) -> billing.BillingRoute:
        runpod = self.runpod
        audit = billing.Audit(lambda _: {v.id for v in runpod.volumes.list()}, runpod.volumes.get)
        return billing.BillingRoute(
            Billed.NETWORK_VOLUME.value, runpod.billing.network_volumes, audit=audit
        )

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        """What our network volumes' storage costs per hour, for the caps of a tick that
        may create: as the provisioner's last read of the PVs found it, or, before its
        first (a process just started), from a read of the PVs now."""
        if self._storage_spend is None:
            try:
                self._storage_spend = self._read_storage_prices(now)
            except kube_errors.KubeError as exc:
                log.warning("could not read the PersistentVolumes for the spend caps: %s", exc)
                return {}
        return self._storage_spend

    def _read_storage_prices(self, now: datetime) -> dict[str | None, float]:
        self._read_classes(now)
        if not any(volume_objects.is_our_class(c) for c in self._classes):
            return {}
        found = storage_prices.by_namespace(self.kube.storage.list_volumes())
        return _with_leaks(
            found, volume_leaks.hourly_usd_leaked(self.store.listed_volumes.listed()[1])
        )

    def _read_classes(self, now: datetime, fresh: bool = False) -> None:
        """The StorageClasses, read once per --catalog-ttl, or now when `fresh` (a pod
        waits for its claim: a class applied a moment ago must not wait out the TTL)."""
        if (
            fresh
            or self._classes_read_at is None
            or now - self._classes_read_at >= self.catalog.ttl
        ):
            self._classes = self.kube.storage.list_classes()
            self._classes_read_at = now

    # --- after the pods' actions ------------------------------------------------------

    def after_pods(self, tick: AfterPods) -> None:
        """The provisioner's step and the leak audit, journaled like the pods' actions."""
        report = tick.report
        observation = report.observation
        if observation is None:
            return
        try:
            view = self._storage_view(observation, report.started_at)
        except kube_errors.KubeError as exc:
            log.warning("could not read the cluster's storage: %s", exc)
            return
        if view is None:
            return
        leaks = self._audit(report, view)
        spend = storage_prices.by_namespace(view.volumes)
        self._storage_spend = _with_leaks(spend, sum(leak.hourly_usd for leak in leaks))
        planned = network_volumes.plan_volumes(view)
        planned = self._within_caps(planned, observation, view, report.started_at)
        actions = [
            *self._untold(planned),
            *volume_leaks.collect(
                leaks, view, report.started_at, self.settings.timing.orphan_grace_time
            ),
        ]
        if not actions:
            return
        tick.run(actions)
        self._storage_spend = storage_prices.with_creates(self._storage_spend, actions)
        for action in actions:
            if isinstance(action, DeleteNetworkVolume) and action in report.done:
                self._forget(report, action.volume_id)

    def _within_caps(
        self,
        planned: list[Action],
        observation: Observation,
        view: volume_objects.StorageView,
        now: datetime,
    ) -> list[Action]:
        """Volume creates and resizes through both caps before their request, counted on
        top of what runs (the tick's list and rows, the PVs just read): the namespaces'
        caps are read only when one is planned (cached, as for pods)."""
        growing = [a for a in planned if isinstance(a, CreateNetworkVolume | ResizeNetworkVolume)]
        if not growing:
            return planned
        caps = self.namespace_caps.get(self.kube, (a.claim.namespace for a in growing), now)
        known = replace(observation, standing_spend=self._storage_spend or {})
        spent = hourly_costs.spent(Situation(known, self.settings, now))
        pvs = {pv["metadata"]["name"]: pv for pv in view.volumes}

        def resized(action: ResizeNetworkVolume) -> tuple[int, str | None]:
            pv = pvs.get(action.pv_name) or {}
            spec = pv.get("spec") or {}
            size = volume_objects.size_gb(str((spec.get("capacity") or {}).get("storage", "0")))
            return size, ((spec.get("csi") or {}).get("volumeAttributes") or {}).get("type")

        return storage_caps.admitted(
            planned, spent, self.settings.caps.max_hourly_spend, caps, resized
        )

    def _audit(
        self, report: TickReport, view: volume_objects.StorageView
    ) -> list[volume_leaks.VolumeLeak]:
        """The volumes of ours that nothing uses, told on every tick from the most recent
        list (this tick's, else the one kept in the store), logged and kept for `cost`."""
        now = report.started_at
        try:
            if view.listed is not None:
                self.store.listed_volumes.save(
                    volume_leaks.ours(view.listed, self.settings.owner_id), now
                )
            known = self.store.listed_volumes.listed()[1]
            leaks = volume_leaks.found(known, view)
            gone = self._gone_since_listed(volume_leaks.to_confirm(leaks, known, view))
            leaks = [leak for leak in leaks if leak.volume.id not in gone]
            self.store.listed_volumes.mark_leaks([leak.volume.id for leak in leaks], now)
        except Exception as exc:  # derived data: the provisioner's actions must still run
            report.errors.append(f"the network-volume leak audit: {exc}")
            log.error("could not audit the network volumes: %s", exc, exc_info=True)
            return []
        report.sections[VolumeSection] = VolumeSection([leak.volume.id for leak in leaks])
        self._record_owners(report, view, [leak.volume for leak in leaks])
        for leak in leaks:
            log.error(
                "network volume %s (%s, %d GB, $%.4f/h) is ours but no PersistentVolume "
                "names it, since %s: %s",
                leak.volume.id,
                leak.volume.name,
                leak.volume.size_gb,
                leak.hourly_usd,
                leak.since.isoformat(),
                leak.why(),
            )
        return leaks

    def _gone_since_listed(self, volume_ids: Sequence[str]) -> frozenset[str]:
        """The kept volumes RunPod answers 404 for now (forgotten); one whose read fails
        is told as a leak all the same (nothing is concluded from a failed read)."""
        try:
            gone = read_by_id(volume_ids, self.runpod.volumes.get).gone
        except runpod_errors.RunPodError as exc:
            log.warning("could not read the leaked volumes by id: %s", exc)
            return frozenset()
        for volume_id in gone:
            self.store.listed_volumes.forget(volume_id)
        return gone

    def _forget(self, report: TickReport, volume_id: str) -> None:
        try:
            self.store.listed_volumes.forget(volume_id)
        except Exception as exc:  # the next list corrects the kept one
            report.errors.append(f"forgetting deleted volume {volume_id}: {exc}")

    def _untold(self, actions: list[Action]) -> list[Action]:
        """The plan without the warnings each claim was given already: a claim that
        cannot be placed says why once (again when the reason changes), not every tick."""
        warned = {
            a.claim.uid: a.message for a in actions if isinstance(a, ClaimEvent) and a.warning
        }
        told, self._claim_warnings = self._claim_warnings, warned
        return [
            a
            for a in actions
            if not (isinstance(a, ClaimEvent) and a.warning and told.get(a.claim.uid) == a.message)
        ]

    def _record_owners(
        self,
        report: TickReport,
        view: volume_objects.StorageView,
        leaks: Sequence[RunPodVolume],
    ) -> None:
        """Whose each volume of ours is, from the PVs the provisioner reads anyway."""
        found = attribution.of_volumes(view.volumes, leaks, self.settings.owner_id)
        try:
            self.attributions.save(self.store, found, report.started_at)
        except Exception as exc:  # derived data: the provisioner's actions must still run
            report.errors.append(f"saving the volumes' owners: {exc}")
            log.error("could not save the volumes' owners: %s", exc, exc_info=True)

    def _storage_view(
        self, observation: Observation, now: datetime
    ) -> volume_objects.StorageView | None:
        """None when no StorageClass names our provisioner."""
        claim_waits = any(
            i.error is not None and i.error.reason is PodReason.CLAIM_NOT_BOUND
            for i in [*observation.create_inputs.values(), *observation.gang_inputs.values()]
        )
        self._read_classes(now, fresh=claim_waits)
        if not any(volume_objects.is_our_class(c) for c in self._classes):
            self._storage_spend = {}
            return None
        view = volume_objects.StorageView(
            self._classes,
            self.kube.storage.list_claims(),
            self.kube.storage.list_volumes(),
            # A gang's pods use claims too, and its members mount their volumes.
            [*observation.pods, *observation.gang_pods],
            [*observation.instances, *observation.members],
            self.settings.owner_id,
            self.settings.node.name,
            self.settings.placement.datacenter_ids,
            now=now,
            create_grace_time=self.settings.timing.create_grace_time,
        )
        if network_volumes.awaits_placing_pods(view):
            view = replace(view, placing=self.kube.pods.list_pending())
        unplaced = network_volumes.unplaced_consumers(view)
        if unplaced:
            view = replace(view, offered=self._best_datacenters(unplaced, observation, now))
        # Listed when a decision needs it, or for the leak audit once the kept list
        # is an hour old (or there is none: a new or lost database).
        listed_at = self.store.listed_volumes.listed()[0]
        if not network_volumes.needs_listing(view) and not volume_leaks.list_due(listed_at, now):
            return view
        try:
            listed = self.runpod.volumes.list()
            # The list lags behind creates: a volume a decision needs that it omits is
            # read by id, and gone only on a 404 (one GET each, only while it lags).
            read = read_by_id(
                network_volumes.unlisted(replace(view, listed=listed)),
                self.runpod.volumes.get,
            )
            # A volume's data center is checked against the catalog before its POST
            # (cached for --catalog-ttl: no request on most ticks that provision).
            known = {dc.id for gpu in self.catalog.get(self.runpod, now) for dc in gpu.datacenters}
        except runpod_errors.RunPodError as exc:
            log.warning("could not list RunPod's network volumes: %s", exc)
            return view
        return replace(
            view, listed=[*listed, *read.found], gone=read.gone, datacenters=frozenset(known)
        )

    def _best_datacenters(
        self, pods: Sequence[KubeObject], observation: Observation, now: datetime
    ) -> dict[str, str]:
        """The data center of each pod's best offer, by pod UID, from the cached catalog
        (a request only when it is older than --catalog-ttl, as the pod's create needs);
        a gang's pod's from the cluster stock its gang's planning reads."""
        found = {}
        for pod in pods:
            inputs = observation.create_inputs.get(podinfo.uid(pod))
            cpu = on_cpu(pod, inputs, self.settings)
            # A gang's pods go where RunPod has cluster stock (read while it forms).
            gang = podinfo.asks_for_cluster(pod) and observation.cluster_catalog
            datacenter = first_datacenter(
                pod,
                inputs.job if inputs else None,
                [] if cpu else gang or self.catalog.get(self.runpod, now),
                self.cpu_catalog.get(self.runpod, now) if cpu else [],
                self.settings,
            )
            if datacenter is not None:
                found[podinfo.uid(pod)] = datacenter
        return found


def _with_leaks(spend: Mapping[str | None, float], leaked_usd: float) -> dict[str | None, float]:
    """Storage spend with the leaked volumes' (no claim: counted in the global caps)."""
    found = dict(spend)
    if leaked_usd:
        found[None] = found.get(None, 0.0) + leaked_usd
    return found
