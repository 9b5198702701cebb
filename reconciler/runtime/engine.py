"""One tick: observe both worlds, plan, apply the plan, record the tick.

docs/architecture.md §2 describes the tick. The engine has no switches: what runs around
its ticks (the writer lock's renewal, the node heartbeat of a process without a heartbeat
schedule, the showing of start-up lines, the loop's metrics) is handed to it as
`TickSteps` where it is built (runtime/wiring.py).

Observation is read-only. Besides the two lists and the rows it fetches only what the
planner will need this tick: the GPU or CPU catalog (cached) and Secrets, ConfigMaps and Jobs
for pods about to be created, and the exit code of a batch instance that just stopped.
A steady tick therefore costs one RunPod call, the pod list pages and the heartbeat.
After an applied tick, starting instances' system lines may be read, while the quota is
ample (runtime/logs/system_events.py: none when no instance is starting).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store, TickSummary
from reconciler.core.actions import Action
from reconciler.core.capacity.stock import StockMemory
from reconciler.core.cluster_record import ClusterRecord
from reconciler.core.config import Settings
from reconciler.core.contract import STOP_ON_EXIT_ENV, exit_nonce
from reconciler.core.domain import (
    CpuFlavor,
    ExitLog,
    GpuType,
    Instance,
    InstanceStatus,
    KubeObject,
    RunPodVolume,
)
from reconciler.core.logs.starting import starting
from reconciler.core.mapping import MappingRecord, unlisted_instances
from reconciler.core.money import attribution
from reconciler.core.plan import gang_end
from reconciler.core.plan.admission import needs_create_inputs
from reconciler.core.plan.observation import CreateInputs, Observation
from reconciler.core.plan.situation import ownership_of
from reconciler.core.planner import plan_tick
from reconciler.core.pods import facts as podinfo
from reconciler.core.pods import ownership
from reconciler.core.pods.offload import PendingPod, has_candidates
from reconciler.core.pods.usage import GpuUtilization, UsageMeter, gpu_utilization
from reconciler.core.reasons import PodReason
from reconciler.core.resources import clusters
from reconciler.core.translate.claims import ClaimMount, claim_mount, claim_names
from reconciler.core.translate.container import choose_container, is_batch
from reconciler.core.translate.env import EnvSources, referenced_objects
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.pull_secrets import registry_credentials
from reconciler.core.translate.ssh import SshAddresses
from reconciler.core.translate.storage import names_network_volume
from reconciler.runtime import resources
from reconciler.runtime.by_id import read_by_id
from reconciler.runtime.catalog import CatalogCache, cpu_catalog, on_cpu
from reconciler.runtime.collector import CollectorPause
from reconciler.runtime.executor import Executor
from reconciler.runtime.logs.sources import KeepLimits, PodLogs
from reconciler.runtime.logs.system_events import StartupLines, SystemEvents
from reconciler.runtime.money import charge_audit
from reconciler.runtime.money import chores as money
from reconciler.runtime.resources.base import AfterPods
from reconciler.runtime.tick_report import TickReport
from reconciler.runtime.writer_lease import WriterLost

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
class TickSteps:
    """What runs around each tick besides observe, plan, apply and record."""

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
    RunPod does not list yet and no pod names (see `runtime/writer_lease.py`)."""
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
        steps: TickSteps = TickSteps(),
        system_events: SystemEvents | None = None,
    ) -> None:
        """`system_events` records RunPod's system lines as Events; the one `steps.startup`
        records with, so that no line is recorded twice."""
        self.settings, self.runpod, self.kube, self.store, self.clock = (
            settings,
            runpod,
            kube,
            store,
            clock,
        )
        self.steps = steps
        # Refusals for want of stock, remembered across ticks (reconciler.core.capacity.stock).
        self.stock = StockMemory()
        self.catalog: CatalogCache[GpuType] = CatalogCache(
            settings.catalog_ttl, self.stock, settings.datacenter_ids, keep=self._keep_catalog
        )
        self.cpu_catalog: CatalogCache[CpuFlavor] = CatalogCache(
            settings.catalog_ttl,
            self.stock,
            settings.datacenter_ids,
            cpu_catalog,
            "CPU catalog",
            self._keep_catalog,
        )
        self.usage = UsageMeter()
        self.collector = CollectorPause()
        """CPU pods' use for the kubelet endpoint's resource metrics, from each list."""
        self.ssh_addresses = SshAddresses()
        """Where our instances run sshd, for the kubelet endpoint's exec, from each list."""
        self.namespace_caps = money.NamespaceCapsCache()
        self.resource_billing = money.ResourceBilling()
        self.attributions = money.Attributions()
        self.resources = resources.registered(
            settings, runpod, kube, store, self.catalog, self.cpu_catalog, self.attributions
        )
        """The cloud resources besides instances and clusters, each a plug-in."""
        self._dry_run = False
        self.system_events = system_events or SystemEvents(kube)
        self.pod_logs = PodLogs(
            settings.node_name,
            runpod,
            kube,
            store,
            clock,
            limits=KeepLimits(settings.log_keep_lines, settings.log_keep_bytes),
            system_events=self.system_events,
        )

    def _keep_catalog(self, entries: Sequence[GpuType | CpuFlavor], now: datetime) -> None:
        """The fetched catalog into the store, for `reconciler offers` (a write per
        --catalog-ttl; none in a dry run, which writes nothing); derived data: a failure
        is logged and the tick goes on."""
        if self._dry_run:
            return
        try:
            self.store.save_catalog(entries, now)
        except Exception as exc:
            log.warning("could not keep the catalog for `reconciler offers`: %s", exc)

    def tick(self, dry_run: bool = False) -> TickReport:
        self.steps.before()
        self.steps.before_action()
        report = TickReport(started_at=self.clock())
        self.runpod.deadline_in(self.settings.tick_deadline)
        self._dry_run = dry_run
        try:
            with self.collector():
                report = self._tick(report, dry_run)
        finally:
            self.runpod.deadline_in(None)
        self.steps.after(self, report)
        return report

    def _tick(self, report: TickReport, dry_run: bool) -> TickReport:
        try:
            observation, report.billing = self._observe(report.started_at)
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
        report.resource_billing = self._read_resource_billing(report.started_at)
        report.pods = len(observation.pods)
        owners = ownership_of(observation, self.settings.owner_id)
        self.usage.observe(observation.pods, owners.owned, report.started_at)
        self.ssh_addresses.observe(owners.owned)
        report.instances = sum(len(g) for g in owners.owned.values())
        report.lookalikes = list(owners.lookalikes)
        report.actions = plan_tick(observation, self.settings, report.started_at, _log_plan_error)
        report.cluster_leaks = money.audit_clusters(
            clusters.unrun(observation.members, observation.gang_pods, self.settings.owner_id),
            self.settings.orphan_grace_time,
            report.started_at,
        )
        report.planned = Counter(type(a).__name__ for a in report.actions)
        if not dry_run:
            if self.steps.heartbeat is not None:
                self._heartbeat(self.steps.heartbeat, report)
            self._record_money(report)
            try:
                self._apply(report)
            except WriterLost as exc:
                report.errors.append(f"stopped: {exc}")
                self._finish(report, dry_run)
                raise
            self._show_startup(observation)
        return self._finish(report, dry_run)

    def _show_startup(self, observation: Observation) -> None:
        self.system_events.forget_others(podinfo.uid(p) for p in observation.pods)
        if self.steps.startup is not None:
            self.steps.startup.update(
                self.runpod, starting(observation.pods, observation.instances, observation.rows)
            )

    def _record_money(self, report: TickReport) -> None:
        """What observing learnt that only the database keeps: billing, caps, look-alikes.

        Derived data: a failure to save any of it is the tick's error, never a reason to
        skip its actions (terminations must go on); the next read learns it again."""
        now = report.started_at
        reads = report.resource_billing
        for what, save in (
            ("billing", lambda: money.save_billing(self.store, self.settings, report.billing, now)),
            (
                "volume and cluster billing",
                lambda: money.save_resource_billing(self.store, self.settings, reads, now),
            ),
            ("clusters' owners", lambda: self._record_cluster_owners(report)),
            ("namespace caps", lambda: self.namespace_caps.save(self.store, now)),
            ("look-alikes", lambda: self._record_lookalikes(report)),
        ):
            try:
                save()
            except Exception as exc:  # any store failure: the actions must still run
                report.errors.append(f"saving {what}: {exc}")
                log.error("could not save %s: %s", what, exc, exc_info=True)

    def _read_resource_billing(self, now: datetime) -> list[money.ResourceBillingRead]:
        try:
            return self.resource_billing.read(self.runpod, self.store, self.settings, now)
        except Exception as exc:  # derived data: an unreadable store blocks no action
            log.error("could not read what billing was read before: %s", exc, exc_info=True)
            return []

    def _record_cluster_owners(self, report: TickReport) -> None:
        """Whose each cluster of ours is, from the list and rows the tick has anyway."""
        observation = report.observation
        if observation is None or not (observation.members or observation.clusters):
            return
        found = attribution.of_clusters(
            observation.members,
            observation.clusters,
            observation.gang_pods,
            self.settings.owner_id,
        )
        self.attributions.save(self.store, found, report.started_at)

    def _record_lookalikes(self, report: TickReport) -> None:
        now = report.started_at
        if report.lookalikes:
            log.warning(
                "unowned, looks like ours (untagged, no row, no annotation; left alone): %s",
                ", ".join(
                    f"{i.instance_id} ({i.namespace}/{i.pod_name})" for i in report.lookalikes
                ),
            )
        self.store.sync_lookalikes(report.lookalikes, now)

    # --- observe ----------------------------------------------------------------------

    def _observe(self, now: datetime) -> tuple[Observation, money.BillingRead]:
        listed = self.runpod.instances.list()
        # Cluster members come in the same list; only the gangs' planning looks at them.
        instances = [i for i in listed if i.cluster_id is None]
        members = [i for i in listed if i.cluster_id is not None]
        on_node = self.kube.pods.list_on_node(self.settings.node_name)
        sorted_pods = podinfo.sort_node_pods(on_node)
        pods, gang_pods = sorted_pods.alone, sorted_pods.gangs
        rows = self.store.load_rows()
        cluster_rows = self.store.load_clusters() if gang_pods or members else []
        members += self._confirm_missing_clusters(members, cluster_rows, gang_pods)
        gang_inputs = self._gang_inputs(gang_pods, members)
        gang_results = self._gang_results(gang_pods, members, cluster_rows, now)
        instances += self._confirm_missing(instances, rows, pods)
        owners = ownership.Ownership.of(self.settings.owner_id, instances, rows, pods)
        owned = owners.owned
        by_uid = {row.pod_uid: row for row in rows}
        needing = [
            p
            for p in pods
            if needs_create_inputs(p, by_uid.get(podinfo.uid(p)), owners, self.settings, now)
        ]
        inputs = self._create_inputs(needing) if needing else {}
        # Each catalog only when a pod about to be created needs it (a request a TTL).
        cpu = {on_cpu(p, inputs.get(podinfo.uid(p)), self.settings) for p in needing}
        wants_gpus = False in cpu or bool(gang_inputs)
        catalog = self.catalog.get(self.runpod, now) if wants_gpus else []
        cpu_catalog = self.cpu_catalog.get(self.runpod, now) if True in cpu else []
        volumes = self._network_volumes(needing, inputs)
        creating = [*needing, *(p for p in gang_pods if clusters.job_uid(p) in gang_inputs)]
        caps = self.namespace_caps.get(
            self.kube, (p["metadata"].get("namespace", "default") for p in creating), now
        )
        storage_spend = self._standing_spend(now) if creating else {}
        exits = self._exit_logs(pods, owned, by_uid)
        try:
            billing = money.read_billing(self.runpod, self.store, self.settings, rows, now)
        except Exception as exc:  # derived data: an unreadable store blocks no action
            log.error("could not read what billing was read before: %s", exc, exc_info=True)
            billing = money.BillingRead()
        pending = self._unscheduled_pods()
        # Cordon and taints matter only to new work: no read in a steady tick.
        node = (
            self.kube.node.read(self.settings.node_name)
            if needing or has_candidates(pending)
            else None
        )
        return Observation(
            pods,
            instances,
            rows,
            catalog,
            cpu_catalog,
            inputs,
            {i: e.code for i, e in exits.items()},
            self.runpod.rate_budget,
            pending,
            node,
            sorted_pods.daemon_sets,
            refused=self.stock.active(now),
            exit_logs={i: e.lines for i, e in exits.items()},
            namespace_caps=caps,
            billing=billing.records,
            spend=billing.spend_by_pod,
            price_differences=billing.differences,
            network_volumes=volumes,
            ownership=owners,
            gang_pods=gang_pods,
            members=members,
            clusters=cluster_rows,
            gang_inputs=gang_inputs,
            gang_results=gang_results,
            storage_spend=storage_spend,
        ), billing

    def _standing_spend(self, now: datetime) -> dict[str | None, float]:
        """What the resources keep that the pod list does not show costs per hour, by
        namespace, for the caps of a tick that may create."""
        found: dict[str | None, float] = {}
        for resource in self.resources:
            for namespace, usd in resource.standing_spend(now).items():
                found[namespace] = found.get(namespace, 0.0) + usd
        return found

    def _gang_inputs(
        self, gang_pods: Sequence[KubeObject], members: Sequence[Instance]
    ) -> dict[str, CreateInputs]:
        """The Job and env sources of each gang with no cluster of ours listed: read
        while it forms (Kubernetes reads only), never while its cluster runs."""
        running = {
            clusters.key_job(gang)
            for gang in clusters.members_by_gang(members, self.settings.owner_id)
        }
        first: dict[str, KubeObject] = {}
        for pod in sorted(gang_pods, key=lambda p: clusters.index_of(p) or 0):
            job = clusters.job_uid(pod)
            live = not podinfo.is_finished(pod) and not podinfo.is_deleting(pod)
            if job is not None and live and job not in running:
                first.setdefault(job, pod)
        inputs = self._create_inputs(list(first.values()))
        return {
            job: inputs[podinfo.uid(pod)]
            for job, pod in first.items()
            if podinfo.uid(pod) in inputs
        }

    def _gang_results(
        self,
        gang_pods: Sequence[KubeObject],
        members: Sequence[Instance],
        rows: Sequence[ClusterRecord],
        now: datetime,
    ) -> dict[str, int | None]:
        """Rank 0's exit code of each running gang due a read (`gang_end.due_reads`):
        one log request per running gang per --gang-result-interval."""
        if not members:
            return {}
        due = gang_end.due_reads(
            clusters.members_by_gang(members, self.settings.owner_id),
            {row.gang: row for row in rows},
            clusters.live_gangs(gang_pods),
            self.settings.gang_result_interval,
            now,
        )
        return self.pod_logs.read_results(due) if due else {}

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

    def _unscheduled_pods(self) -> list[PendingPod]:
        """Pending pods without a node, each with its Job (one GET per Job), to offload."""
        jobs: dict[tuple[str, str], KubeObject | None] = {}
        pending = []
        for pod in self.kube.pods.list_pending():
            if not (podinfo.is_ours_to_run(pod) or podinfo.asks_for_cluster(pod)):
                continue
            key = (pod["metadata"].get("namespace", ""), _job_owner_uid(pod))
            try:
                if key[1] and key not in jobs:
                    jobs[key] = self.kube.jobs.owning(pod)
            except kube_errors.KubeError as exc:
                log.warning(
                    "could not read the Job of %s/%s: %s", key[0], pod["metadata"]["name"], exc
                )
                continue
            pending.append(PendingPod(pod, jobs.get(key)))
        return pending

    def _confirm_missing(
        self, listed: Sequence[Instance], rows: Sequence[MappingRecord], pods: Sequence[KubeObject]
    ) -> list[Instance]:
        """The mapped instances of live pods that the list omits, read by id (one GET
        each, none in a steady tick): `runtime/by_id.py`'s rule for every resource."""
        missing = unlisted_instances(rows, {i.id for i in listed}, {podinfo.uid(p) for p in pods})
        return read_by_id(missing, self.runpod.instances.get).found

    def _confirm_missing_clusters(
        self,
        listed: Sequence[Instance],
        rows: Sequence[ClusterRecord],
        gang_pods: Sequence[KubeObject],
    ) -> list[Instance]:
        """The members of each cluster a live gang records that the list omits, read
        by id (`GET /v2/clusters/{id}/pods`, one per cluster, none in a steady tick)."""
        read = read_by_id(clusters.unlisted(rows, gang_pods, listed), self.runpod.clusters.members)
        return [member for members in read.found for member in members]

    def _exit_logs(
        self,
        pods: Sequence[KubeObject],
        owned: Mapping[str, list[Instance]],
        rows: Mapping[str, MappingRecord],
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

    def _create_inputs(self, pods: Sequence[KubeObject]) -> dict[str, CreateInputs]:
        inputs: dict[str, CreateInputs] = {}
        for pod in pods:
            try:
                inputs[podinfo.uid(pod)] = self._inputs_for(pod)
            except kube_errors.KubeError as exc:
                # Not the pod's fault: leave it for the next tick without a reason.
                log.warning(
                    "could not read what %s/%s needs: %s",
                    pod["metadata"].get("namespace"),
                    pod["metadata"]["name"],
                    exc,
                )
            except Exception as exc:  # one malformed pod never stops the tick
                log.debug(
                    "reading what %s/%s needs failed",
                    pod["metadata"].get("namespace"),
                    pod["metadata"].get("name"),
                    exc_info=True,
                )
                inputs[podinfo.uid(pod)] = CreateInputs(
                    error=TranslationError(
                        PodReason.INVALID_POD_SPEC,
                        f"the pod spec could not be read ({type(exc).__name__}: {exc})",
                        permanent=False,
                    )
                )
        return inputs

    def _inputs_for(self, pod: KubeObject) -> CreateInputs:
        job = self.kube.jobs.owning(pod)
        try:
            container = choose_container(pod)
        except TranslationError as error:
            return CreateInputs(job=job, error=error)
        namespace = pod["metadata"].get("namespace", "default")
        secret_names, config_map_names = referenced_objects(pod, container)
        secrets = self._read_all(self.kube.secrets.read, namespace, secret_names)
        config_maps = self._read_all(self.kube.cluster.read_config_map, namespace, config_map_names)
        pull_names = [ref.get("name", "") for ref in pod["spec"].get("imagePullSecrets") or ()]
        pull = self._read_all(self.kube.secrets.read, namespace, pull_names)
        try:
            claim = self._claim_mount(pod, container)
        except TranslationError as error:
            return CreateInputs(job=job, error=error)
        return CreateInputs(
            job=job,
            sources=EnvSources(secrets, config_maps),
            pull_secret=registry_credentials(container.get("image", ""), pull),
            claim=claim,
        )

    def _claim_mount(self, pod: KubeObject, container: KubeObject) -> ClaimMount | None:
        """The pod's claims and their PVs (a GET each, only for a pod about to be created
        that mounts claims), as the translation reads them."""
        namespace = pod["metadata"].get("namespace", "default")
        claims = {name: self.kube.storage.read_claim(namespace, name) for name in claim_names(pod)}
        bound = {c["spec"].get("volumeName") for c in claims.values() if c is not None}
        volumes = {name: self.kube.storage.read_volume(name) for name in bound if name}
        return claim_mount(pod, container, claims, volumes)

    @staticmethod
    def _read_all(
        read: Callable[[str, str], dict[str, str] | None], namespace: str, names: Any
    ) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = {}
        for name in names:
            data = read(namespace, name)
            if data is not None:
                found[name] = data
        return found

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
            self.stock,
            self.pod_logs.keep,
            before_action=self.steps.before_action,
            creates_held=self.steps.creates_held,
            owner_id=self.settings.owner_id,
            unrecorded_creates=self.steps.unrecorded_creates,
            annotate_created=self.steps.annotate_created,
            resources=self.resources,
        )
        outcome = executor.run(report.actions)
        if executor.refusals:
            self.catalog.mark_stale()
            self.cpu_catalog.mark_stale()
        report.applied, report.failed, report.done = outcome.applied, outcome.failed, outcome.done
        report.deferred_creates = executor.deferred
        report.errors += outcome.errors
        if executor.past_deadline:
            log.warning(
                "tick deadline (%.0f s) passed: %d creates wait for a later tick",
                self.settings.tick_deadline,
                executor.deferred,
            )
        tick = AfterPods(
            report, lambda actions: _run_into(executor, actions, report), executor.steps
        )
        for resource in self.resources:
            resource.after_pods(tick)
        if report.observation is not None:
            self._audit_charges(report, report.observation)
        leaks = [leak for read in report.resource_billing for leak in read.leaks]
        if leaks:
            _run_into(executor, leaks, report)

    def _audit_charges(self, report: TickReport, observation: Observation) -> None:
        """The hourly ghost-charge audit (`runtime/money/charge_audit.py`), on a quiet tick:
        no create planned and no instance starting (their reads come first), unless it
        has been put off for hours."""
        now = report.started_at
        quiet = not (report.planned["Create"] or report.planned["CreateCluster"]) and not starting(
            observation.pods, observation.instances, observation.rows
        )
        read = charge_audit.charges_read(report.billing, report.resource_billing, now)
        report.ghost_charges = charge_audit.audit(
            self.runpod, self.kube, self.store, observation, read, now, quiet=quiet
        )

    def _gpus(self, observation: Observation | None) -> list[GpuUtilization]:
        if observation is None:
            return []
        return gpu_utilization(
            observation.pods, ownership_of(observation, self.settings.owner_id).owned
        )

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


def _job_owner_uid(pod: KubeObject) -> str:
    """The UID of the Job the pod names as its owner, or ""."""
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == "Job":
            return str(ref.get("uid", ""))
    return ""


def _run_into(executor: Executor, actions: Sequence[Action], report: TickReport) -> None:
    """Actions decided after the tick's plan (collections), run and counted in its report."""
    outcome = executor.run(actions)
    report.actions += actions
    report.planned.update(type(a).__name__ for a in actions)
    report.applied.update(outcome.applied)
    report.failed.update(outcome.failed)
    report.done += outcome.done
    report.errors += outcome.errors
