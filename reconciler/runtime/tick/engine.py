"""One tick: observe both worlds, plan, apply the plan, record the tick.

docs/architecture.md §2 describes the tick. The engine has no switches: what runs around
its ticks (the writer lock's renewal, the node heartbeat of a process without a heartbeat
schedule, the showing of start-up lines, the loop's metrics) is handed to it as
`TickHooks` where it is built (runtime/process/wiring.py).

Observation is read-only. Besides the two lists and the rows it fetches only what the
planner will need this tick: the GPU or CPU catalog (cached) and Secrets, ConfigMaps and Jobs
for pods about to be created, and the exit code of a batch instance that just stopped.
What else a tick does (the money chores, offload's reads, what the list tells the kubelet
endpoint) are chores the engine runs at fixed points (`runtime/tick/chores/`).
A steady tick therefore costs one RunPod call, the pod list pages and the heartbeat.
Before the plan of a tick that acts, starting instances' system lines may be read, while
the quota is ample (runtime/logs/system_events.py: none when no instance is starting): a
start they show cannot succeed is replaced in that same tick (core/plan/starts.py).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store, TickSummary
from reconciler.core.actions import Action
from reconciler.core.capacity.stock import StockMemory
from reconciler.core.config import Settings
from reconciler.core.domain import CpuFlavor, GpuType
from reconciler.core.logs.starting import starting
from reconciler.core.plan.observation import Observation
from reconciler.core.plan.situation import ownership_of
from reconciler.core.planner import plan_tick
from reconciler.core.pods import podinfo
from reconciler.core.pods.usage import GpuUtilization, gpu_utilization
from reconciler.core.resources.clusters import members_by_pod
from reconciler.runtime.logs.sources import KeepLimits, PodLogs
from reconciler.runtime.logs.system_events import StartupLines, SystemEvents
from reconciler.runtime.tick import resources
from reconciler.runtime.tick.catalog import CatalogCache, cpu_catalog
from reconciler.runtime.tick.chores.base import Chore
from reconciler.runtime.tick.chores.listed import ListedChore
from reconciler.runtime.tick.chores.money import MoneyChore
from reconciler.runtime.tick.chores.offload import OffloadReads
from reconciler.runtime.tick.collector import CollectorPause
from reconciler.runtime.tick.create_inputs import CreateInputsReader
from reconciler.runtime.tick.executor import Executor, WriterLost
from reconciler.runtime.tick.money import billing
from reconciler.runtime.tick.resources.base import AfterPods, Sighting
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


def _log_plan_error(uid: str, exc: Exception) -> None:
    log.debug("could not plan pod %s", uid, exc_info=exc)


def _ignore_count(_count: int) -> None:
    """No one to tell."""


def _nothing() -> None:
    """No step."""


def _ignore(_engine: Engine, _report: TickReport) -> None:
    """No step."""


def _never() -> bool:
    return False


@dataclass(frozen=True)
class TickHooks:
    """What the process hooks into each tick (built in runtime/process/wiring.py): the
    writer lock and Lease, the heartbeat, the start-up lines, the loop's metrics. Not
    the tick's own chores (`runtime/tick/chores/`), nor a resource's steps."""

    before: Callable[[], None] = _nothing
    """First of all; raising refuses the tick (the writer lock's renewal)."""
    heartbeat: Callable[[], None] | None = None
    """Before the plan is applied (not in a dry run), for a process that has no heartbeat
    schedule of its own. A KubeError goes into the tick's errors; the tick goes on."""
    after: Callable[[Engine, TickReport], None] = _ignore
    """Last, with the engine and its finished report (the loop's metrics and readiness)."""
    before_action: Callable[[], None] = _nothing
    """Before the tick and each of its actions: keeps the node's writer Lease
    (docs/architecture.md §4, One writer per node); raises WriterLost, which ends the tick."""
    creates_held: Callable[[], bool] = _never
    """True while no create may start: a writer before us may have made an instance that
    RunPod does not list yet and no pod names (see `runtime/process/writer_lease.py`)."""
    unrecorded_creates: Callable[[int], None] = _ignore_count
    """Told after each applied tick how many of its creates may have made an instance
    whose id is not on its pod yet."""
    annotate_created: bool = False
    """Write each new instance's id onto its pod before the tick ends (`sync --once`)."""
    startup: StartupLines | None = None
    """After an applied tick: shows starting instances' system lines as Events while
    they start (`sync` and `sync --once`; without it they show when the instance ends)."""


class Engine:
    def __init__(
        self,
        settings: Settings,
        runpod: RunPodClient,
        kube: KubeClient,
        store: Store,
        clock: Clock = utcnow,
        hooks: TickHooks = TickHooks(),
        system_events: SystemEvents | None = None,
    ) -> None:
        """`system_events` records RunPod's system lines as Events; the one `steps.startup`
        records with, so that no line is recorded twice."""
        self.settings, self.runpod, self.kube, self.store = settings, runpod, kube, store
        self.wall = clock
        # Graces are measured on RunPod's time, carried on by the monotonic clock: a
        # step of this host's clock moves neither (docs/architecture.md §4, "Clocks").
        self.clock: Clock = lambda: runpod.served_now() or clock()
        self.hooks = hooks
        # Refusals for want of stock, remembered across ticks (reconciler.core.capacity.stock).
        self.stock = StockMemory()
        self.catalog: CatalogCache[GpuType] = CatalogCache(
            settings.timing.catalog_ttl,
            self.stock,
            settings.placement.datacenter_ids,
            keep=self._keep_catalog,
        )
        self.cpu_catalog: CatalogCache[CpuFlavor] = CatalogCache(
            settings.timing.catalog_ttl,
            self.stock,
            settings.placement.datacenter_ids,
            cpu_catalog,
            "CPU catalog",
            self._keep_catalog,
        )
        self.collector = CollectorPause()
        self.attributions = billing.Attributions()
        self._dry_run = False
        self.system_events = system_events or SystemEvents(kube)
        self.pod_logs = PodLogs(
            settings.node.name,
            runpod,
            kube,
            store,
            clock,
            limits=KeepLimits(settings.logs.keep_lines, settings.logs.keep_bytes),
            system_events=self.system_events,
        )
        self.create_inputs = CreateInputsReader(kube, settings.services.forwards_per_pod, clock)
        self.shared = resources.Shared(
            settings,
            runpod,
            kube,
            store,
            self.stock,
            self.catalog,
            self.cpu_catalog,
            self.pod_logs,
            self.attributions,
        )
        """What every resource is handed (`runtime/tick/resources/base.py`)."""
        self.resources = resources.registered(self.shared)
        """The cloud resources, each a plug-in (`runtime/tick/resources/`)."""
        self.listed = ListedChore(store, settings.owner_id)
        self.usage, self.ssh_addresses = self.listed.usage, self.listed.ssh_addresses
        self.chores: list[Chore] = [
            MoneyChore(settings, runpod, kube, store, self.resources),
            OffloadReads(kube, settings.node.name),
            self.listed,
        ]
        """What a tick does besides observe, plan, apply and record, in this order
        (`runtime/tick/chores/`)."""

    def _keep_catalog(self, entries: Sequence[GpuType | CpuFlavor], now: datetime) -> None:
        """The fetched catalog into the store, for `reconciler offers` (a write per
        --catalog-ttl; none in a dry run, which writes nothing); derived data: a failure
        is logged and the tick goes on."""
        if self._dry_run:
            return
        try:
            self.store.catalogs.save(entries, now)
        except Exception as exc:
            log.warning("could not keep the catalog for `reconciler offers`: %s", exc)

    def tick(self, dry_run: bool = False) -> TickReport:
        self.hooks.before()
        self.hooks.before_action()
        report = TickReport(started_at=self.clock())
        self.runpod.deadline_in(self.settings.timing.tick_deadline)
        self._dry_run = dry_run
        try:
            with self.collector():
                report = self._tick(report, dry_run)
        finally:
            self.runpod.deadline_in(None)
        self.hooks.after(self, report)
        return report

    def _tick(self, report: TickReport, dry_run: bool) -> TickReport:
        try:
            observation, report.billing = self._observe(report)
        except runpod_errors.RateLimitedError as exc:
            # Not an error: RunPod asked us to wait, and the next tick will list again.
            report.skipped = "skipped, rate limited by RunPod" + (
                f" (retry after {exc.retry_after:.0f} s)" if exc.retry_after is not None else ""
            )
            log.warning("tick %s", report.skipped)
            return self._finish(report, dry_run)
        except (runpod_errors.RunPodError, kube_errors.KubeError) as exc:
            report.errors.append(f"observe: {exc}")
            log.error("tick skipped, could not observe: %s", exc)
            return self._finish(report, dry_run)
        report.observed, report.observation = True, observation
        report.pods = len(observation.pods)
        owners = ownership_of(observation, self.settings.owner_id)
        report.instances = sum(len(g) for g in owners.owned.values())
        report.lookalikes = list(owners.lookalikes)
        for chore in self.chores:
            chore.observed(report, owners)
        if not dry_run:
            # Before the plan: a start the lines say failed is replaced in this tick.
            observation = self._show_startup(observation)
        report.actions = plan_tick(observation, self.settings, report.started_at, _log_plan_error)
        for resource in self.resources:
            report.actions += resource.plan(observation, report.started_at)
        for resource in self.resources:
            resource.planned(report)
        report.planned = Counter(type(a).__name__ for a in report.actions)
        if not dry_run:
            if self.hooks.heartbeat is not None:
                self._heartbeat(self.hooks.heartbeat, report)
            for chore in self.chores:
                chore.before_apply(report)
            try:
                self._apply(report)
            except WriterLost as exc:
                report.errors.append(f"stopped: {exc}")
                self._finish(report, dry_run)
                raise
        return self._finish(report, dry_run)

    def _show_startup(self, observation: Observation) -> Observation:
        """Starting instances' system lines as Events, read (or streamed) now; the
        observation with the starts those lines said cannot succeed."""
        self.system_events.forget_others(podinfo.uid(p) for p in observation.pods)
        if self.hooks.startup is None:
            return observation
        self.hooks.startup.update(
            self.runpod, starting(observation.pods, observation.instances, observation.rows)
        )
        return replace(observation, start_failures=self.hooks.startup.failed_starts())

    # --- observe ----------------------------------------------------------------------

    def _observe(self, report: TickReport) -> tuple[Observation, billing.BillingRead]:
        """The one RunPod list and the node's pods, then each resource's own reads. The
        tick's time is taken again once the list answered: the first tick of a process
        then measures on RunPod's time too."""
        listed = self.runpod.instances.list()
        report.started_at = now = self.clock()
        sorted_pods = podinfo.sort_node_pods(self.kube.pods.list_on_node(self.settings.node.name))
        sighting = Sighting(
            now,
            listed,
            sorted_pods.alone,
            sorted_pods.gangs,
            self.create_inputs.read,
            lambda gpus, cpus: self._catalogs(gpus, cpus, now),
        )
        for resource in self.resources:
            resource.observe(sighting)
        for chore in self.chores:
            sighting.found.update(chore.observe(sighting))
        return Observation(
            pods=sighting.pods,
            rate_budget=self.runpod.rate_budget,
            daemon_pods=sorted_pods.daemon_sets,
            refused=self.stock.active(now),
            runpod_now=self.runpod.instances.listed_at,
            gang_pods=sighting.gang_pods,
            slots=sighting.slots,
            **sighting.found,
        ), sighting.billing

    def _catalogs(
        self, gpus: bool, cpus: bool, now: datetime
    ) -> tuple[list[GpuType], list[CpuFlavor]]:
        """Each catalog only when a create of the tick needs it (a request a TTL)."""
        return (
            self.catalog.get(self.runpod, now) if gpus else [],
            self.cpu_catalog.get(self.runpod, now) if cpus else [],
        )

    # --- apply and record -------------------------------------------------------------

    @staticmethod
    def _heartbeat(beat: Callable[[], None], report: TickReport) -> None:
        try:
            beat()
        except kube_errors.KubeError as exc:
            report.errors.append(f"heartbeat: {exc}")
            log.warning("node heartbeat failed: %s", exc)

    def _apply(self, report: TickReport) -> None:
        def tick_id() -> int:
            # The journal's entries point at the tick row: open it with the first one.
            if report.tick_id is None:
                report.tick_id = self.store.open_tick(report.started_at)
            return report.tick_id

        executor = Executor(
            self.runpod,
            self.kube,
            self.store,
            self.clock,
            tick_id,
            self.resources,
            before_action=self.hooks.before_action,
            creates_held=self.hooks.creates_held,
            unrecorded_creates=self.hooks.unrecorded_creates,
            annotate_created=self.hooks.annotate_created,
        )
        outcome = executor.run(report.actions)
        report.applied, report.failed, report.done = outcome.applied, outcome.failed, outcome.done
        report.deferred_creates = executor.deferred
        report.errors += outcome.errors
        if executor.past_deadline:
            log.warning(
                "tick deadline (%.0f s) passed: %d creates wait for a later tick",
                self.settings.timing.tick_deadline,
                executor.deferred,
            )
        tick = AfterPods(
            report, lambda actions: _run_into(executor, actions, report), executor.context
        )
        for resource in self.resources:
            resource.after_pods(tick)
        for chore in self.chores:
            chore.after_pods(report, lambda actions: _run_into(executor, actions, report))

    def _gpus(self, observation: Observation | None) -> list[GpuUtilization]:
        if observation is None:
            return []
        owner = self.settings.owner_id
        owned = ownership_of(observation, owner).owned
        members = members_by_pod(observation.gang_pods, observation.members, owner)
        pods = [*observation.pods, *observation.gang_pods]
        return gpu_utilization(pods, {**owned, **members})

    def _finish(self, report: TickReport, dry_run: bool) -> TickReport:
        report.finished_at = finished = self.clock()
        if dry_run:
            return report
        report.gpus = self._gpus(report.observation)
        report.tick_id = self.store.record_tick(
            TickSummary(
                started_at=report.started_at,
                finished_at=finished,
                pods_seen=report.pods,
                instances_seen=report.instances,
                actions_planned=sum(report.planned.values()),
                actions_applied=sum(report.applied.values()),
                actions_failed=sum(report.failed.values()),
                errors=tuple(report.errors),
                gpu_utilization=_by_pod(report.gpus),
            ),
            report.tick_id,
        )
        return report


def _by_pod(gpus: Sequence[GpuUtilization]) -> dict[str, list[float]]:
    """The tick row's form: each GPU pod's GPUs ("<namespace>/<pod>")."""
    found: dict[str, list[float]] = {}
    for gpu in gpus:
        found.setdefault(f"{gpu.namespace}/{gpu.pod}", []).append(gpu.ratio)
    return found


def _run_into(executor: Executor, actions: Sequence[Action], report: TickReport) -> None:
    """Actions decided after the tick's plan (collections), run and counted in its report."""
    outcome = executor.run(actions)
    report.actions += actions
    report.planned.update(type(a).__name__ for a in actions)
    report.applied.update(outcome.applied)
    report.failed.update(outcome.failed)
    report.done += outcome.done
    report.errors += outcome.errors
