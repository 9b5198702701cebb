"""Instances as a resource of the tick: what the planner needs of them (the one list,
read by id where it lags, the rows, what a create needs, exit codes, charges) and their
steps (`instance_steps.py`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.core.actions import Action
from reconciler.core.contract import STOP_ON_EXIT_ENV, exit_nonce
from reconciler.core.domain import (
    ExitLog,
    Instance,
    InstanceStatus,
    KubeObject,
    RunPodVolume,
)
from reconciler.core.mapping import MappingRow, unconfirmed_instances
from reconciler.core.plan.admission import needs_create_inputs
from reconciler.core.plan.observation import CreateInputs, Observation, Observed
from reconciler.core.pods import ownership, podinfo
from reconciler.core.resources import registries
from reconciler.core.translate.container import is_batch
from reconciler.core.translate.disks import names_network_volume
from reconciler.runtime.tick.by_id import believed, read_by_id
from reconciler.runtime.tick.catalog import on_cpu
from reconciler.runtime.tick.money import billing
from reconciler.runtime.tick.resources.base import AfterPods, Shared, Sighting
from reconciler.runtime.tick.resources.instance_steps import InstanceSteps
from reconciler.runtime.tick.resources.registries import RegistrySteps
from reconciler.runtime.tick.run_context import RunContext
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)


class Instances:
    def __init__(self, shared: Shared) -> None:
        self.settings, self.runpod, self.store = shared.settings, shared.runpod, shared.store
        self.stock, self.pod_logs = shared.stock, shared.pod_logs
        self.catalogs = (shared.catalog, shared.cpu_catalog)

    def steps(self, context: RunContext) -> InstanceSteps:
        return InstanceSteps(
            context,
            lambda: context.steps_of(RegistrySteps),
            self.stock,
            self.pod_logs.keep,
            registries.Naming(self.settings.owner_id, self.settings.placement.registry_auth_ids),
        )

    def plan(self, observation: Observation, now: datetime) -> Sequence[Action]:
        return ()  # the planner plans its actions

    def billing(self) -> billing.BillingRoute | None:
        return None  # billed as instances are: `runtime/tick/money/billing.py`'s pod billing

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        return {}  # an instance's price is counted from its row with its pod

    def planned(self, report: TickReport) -> None:
        """Nothing to tell of the plan."""

    def after_pods(self, tick: AfterPods) -> None:
        """A create refused for want of stock proves the cached catalogs stale."""
        if tick.steps_of(InstanceSteps).refusals:
            for catalog in self.catalogs:
                catalog.mark_stale()

    def observe(self, sighting: Sighting) -> None:
        now, pods = sighting.now, sighting.pods
        instances = [i for i in sighting.listed if i.cluster_id is None]
        rows = self.store.load_rows()
        instances, owners = self._owners(sighting.listed, instances, rows, pods)
        by_uid = {row.pod_uid: row for row in rows}
        needing = [
            p
            for p in pods
            if needs_create_inputs(p, by_uid.get(podinfo.uid(p)), owners, self.settings, now)
        ]
        inputs = sighting.create_inputs(needing) if needing else {}
        # Each catalog only when a pod about to be created needs it (a request a TTL).
        cpu = {on_cpu(p, inputs.get(podinfo.uid(p)), self.settings) for p in needing}
        catalog, cpu_catalog = sighting.catalogs(False in cpu or sighting.wants_gpus, True in cpu)
        volumes = self._network_volumes(needing, inputs)
        sighting.creating += needing
        sighting.wants_node |= bool(needing)
        exits = self._exit_logs(pods, owners.owned, by_uid)
        try:
            read = billing.read_billing(self.runpod, self.store, self.settings, rows, now)
        except Exception as exc:  # derived data: an unreadable store blocks no action
            log.error("could not read what billing was read before: %s", exc, exc_info=True)
            read = billing.BillingRead()
        sighting.billing = read
        sighting.found.update(
            Observed(
                instances=instances,
                rows=rows,
                catalog=catalog,
                cpu_catalog=cpu_catalog,
                create_inputs=inputs,
                exit_codes={i: e.code for i, e in exits.items()},
                exit_logs={i: e.lines for i, e in exits.items()},
                billing=read.records,
                spend=read.spend_by_pod,
                price_differences=read.differences,
                network_volumes=volumes,
                ownership=owners,
            )
        )

    def _owners(
        self,
        listed: Sequence[Instance],
        instances: Sequence[Instance],
        rows: Sequence[MappingRow],
        pods: Sequence[KubeObject],
    ) -> tuple[list[Instance], ownership.Ownership]:
        """The instances (the list's, with what was read by id) and which are ours. The
        mapped instances of live pods that the list omits or shows otherwise than as
        theirs are read by id (one GET each, none in a steady tick), and their records
        replace what the list showed: `runtime/tick/by_id.py`'s rule for every resource."""
        owner_id = self.settings.owner_id
        records = self._records(listed, instances, rows, pods)
        found = list(instances)
        if len(records.instances) > len(found):  # read by id: the list lagged
            shown = {i.id for i in found}
            found += [i for i in records.instances.values() if i.id not in shown]
        owners = ownership.Ownership.of(owner_id, found, rows, pods, records)
        doubted = unconfirmed_instances(
            rows,
            owners.owned,
            {instance.id for instance, _ in owners.lost_tags},
            {podinfo.uid(p) for p in pods},
        )
        if not doubted:
            return found, owners
        read = read_by_id(doubted, self.runpod.instances.get)
        found = believed(found, read, _instance_id)
        known = {k: i for k, i in records.instances.items() if k not in read.asked}
        known.update((i.id, i) for i in read.found if i.cluster_id is None)
        records = ownership.Records(known, records.members, {*records.gone, *read.gone})
        return found, ownership.Ownership.of(owner_id, found, rows, pods, records)

    def _records(
        self,
        listed: Sequence[Instance],
        instances: Sequence[Instance],
        rows: Sequence[MappingRow],
        pods: Sequence[KubeObject],
    ) -> ownership.Records:
        """What RunPod says of the ids the pods' runpod.io/pod-id name: the tick's list,
        and a read by id of each id a pod that may have its row rebuilt names and the
        list omits (one GET each, none in a steady tick: such a pod gets its row, or is
        created and the annotation rewritten, that very tick)."""
        members = {i.id for i in listed if i.cluster_id is not None}
        known = {i.id: i for i in instances}
        read = read_by_id(
            ownership.unlisted_annotations(pods, rows, known.keys() | members),
            self.runpod.instances.get,
        )
        members |= {i.id for i in read.found if i.cluster_id is not None}
        known.update((i.id, i) for i in read.found if i.cluster_id is None)
        return ownership.Records(known, members, read.gone)

    def _network_volumes(
        self, needing: Sequence[KubeObject], inputs: Mapping[str, CreateInputs]
    ) -> list[RunPodVolume] | None:
        """The account's network volumes, listed only when a pod about to be created
        mounts one (its volume and data center are checked before any create)."""
        if not any(
            names_network_volume(p, inputs[podinfo.uid(p)].job)
            for p in needing
            if podinfo.uid(p) in inputs
        ):
            return None
        try:
            return self.runpod.volumes.list()
        except runpod_errors.RateLimitedError:
            raise
        except runpod_errors.RunPodError as exc:
            log.warning("could not list RunPod's network volumes: %s", exc)
            return None

    def _exit_logs(
        self,
        pods: Sequence[KubeObject],
        owned: Mapping[str, list[Instance]],
        rows: Mapping[str, MappingRow],
    ) -> dict[str, ExitLog]:
        """Read the exit code of batch instances that stopped and whose code we lack."""
        stopped: list[tuple[str, str]] = []
        for pod in pods:
            uid = podinfo.uid(pod)
            exited = [i for i in owned.get(uid, ()) if i.status is InstanceStatus.EXITED]
            if not exited:
                continue  # most pods: spare reading their spec
            row = rows.get(uid)
            if not is_batch(pod) or (row is not None and row.exit_code is not None):
                continue
            # The nonce the instance was started with (an older one's: LEGACY_NONCE).
            stopped += [(i.id, i.env.get(STOP_ON_EXIT_ENV) or exit_nonce(uid)) for i in exited]
        return self.pod_logs.read_exits(stopped)


def _instance_id(instance: Instance) -> str:
    return instance.id
