"""Prometheus metrics of the loop mode, fed from each tick's report and the RunPod client.

What happened to instances is read from the tick's carried-out actions (`report.done`),
by the reasons the planner gives them; nothing here decides anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import assert_never

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reconciler.core.actions import (
    Action,
    DeleteCluster,
    PatchStatus,
    RestoreTags,
    SaveRow,
    Terminate,
)
from reconciler.core.plan.situation import ownership_of
from reconciler.core.pods import podinfo
from reconciler.core.pods.usage import GpuUtilization
from reconciler.core.reasons import TerminateReason
from reconciler.runtime.tick.resources.sections import (
    ClusterSection,
    RegistrySection,
    VolumeSection,
)
from reconciler.runtime.tick.tick_report import TickReport


class GpuGauge(Collector):
    """`reconciler_pod_gpu_utilization_ratio`, made when Prometheus scrapes, from the last
    tick's figures kept as one string. Kept as a series object per GPU, or as any object
    per GPU, they cost the tick to set and, worse, each small object kept past the tick
    pins the memory pools of the freed pods' JSON it was made among: 10 000 GPUs held
    25 to 50 MB of a steady tick's peak that way."""

    NAME = "reconciler_pod_gpu_utilization_ratio"
    HELP = (
        "Utilization of each GPU of a pod's RunPod instance (0-1), as RunPod's list "
        "reports it; CPU and memory of GPU pods are not shown by kubectl top, since "
        "RunPod gives their percentages without a base."
    )
    LABELS = ("namespace", "pod", "gpu")

    def __init__(self) -> None:
        self._lines = ""
        """A line per GPU: namespace, pod, index and ratio, tab-separated (names of
        Kubernetes objects hold no tab)."""

    def keep(self, gpus: Sequence[GpuUtilization]) -> None:
        """The last tick's figures; pods gone since the tick before are not in them."""
        self._lines = "".join([f"{g.namespace}\t{g.pod}\t{g.gpu}\t{g.ratio!r}\n" for g in gpus])

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.NAME, self.HELP, labels=self.LABELS)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=self.LABELS)
        for line in self._lines.splitlines():
            namespace, pod, gpu, ratio = line.split("\t")
            family.add_metric((namespace, pod, gpu), float(ratio))
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.tick_seconds = Histogram(
            "reconciler_tick_duration_seconds",
            "Duration of one reconcile tick.",
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.ticks = Counter(
            "reconciler_ticks", "Ticks by result.", ["result"], registry=self.registry
        )
        self.early_ticks = Counter(
            "reconciler_early_ticks",
            "Ticks started early because the pod watch saw a change.",
            registry=self.registry,
        )
        self.actions = Counter(
            "reconciler_actions",
            "Actions by kind and outcome.",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.pods = Gauge(
            "reconciler_managed_pods", "Pods bound to the virtual node.", registry=self.registry
        )
        self.instances = Gauge(
            "reconciler_owned_instances", "RunPod instances we own.", registry=self.registry
        )
        self.without_pods = Gauge(
            "reconciler_instances_without_pods",
            "RunPod instances we own whose pod is not on the node: orphans, billing until "
            "they are terminated (after two sightings and the orphan grace).",
            registry=self.registry,
        )
        self.hourly_cost = Gauge(
            "reconciler_owned_cost_per_hour_usd",
            "What the instances we own cost together, USD per hour.",
            registry=self.registry,
        )
        self.rate_budget = Gauge(
            "reconciler_runpod_rate_budget_remaining",
            "RunPod requests left in the current window.",
            registry=self.registry,
        )
        self.runpod_requests = Counter(
            "reconciler_runpod_requests",
            "RunPod API answers by method, route template and HTTP status (0: no answer).",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.orphans_found = Counter(
            "reconciler_orphans_found",
            "Owned instances first seen without their pod.",
            registry=self.registry,
        )
        self.orphans_terminated = Counter(
            "reconciler_orphans_terminated",
            "Orphaned instances terminated.",
            registry=self.registry,
        )
        self.duplicates_healed = Counter(
            "reconciler_duplicates_healed",
            "Second instances of one pod terminated.",
            registry=self.registry,
        )
        self.starts_failed = Counter(
            "reconciler_starts_failed",
            "Instances terminated because their start did not finish (too slow, a host it "
            "cannot start on, an image no host can pull).",
            registry=self.registry,
        )
        self.pending_to_running = Histogram(
            "reconciler_pod_pending_to_running_seconds",
            "From a pod's creation to the status patch that made it Running.",
            registry=self.registry,
            buckets=(5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600),
        )
        self.leader = Gauge(
            "reconciler_leader",
            "1 while this replica leads (or runs without election), else 0.",
            registry=self.registry,
        )
        self.heartbeats = Counter(
            "reconciler_node_heartbeats",
            "Node heartbeats by result.",
            ["result"],
            registry=self.registry,
        )
        self.tags_restored = Counter(
            "reconciler_tags_restored",
            "Owner tags put back on instances we own by row or "
            "annotation after their env was replaced.",
            registry=self.registry,
        )
        self.lookalikes = Gauge(
            "reconciler_unowned_lookalike_instances",
            "Untagged instances nothing of ours names, named like ours: reported, never touched.",
            registry=self.registry,
        )
        self.leaked_volumes = Gauge(
            "reconciler_leaked_network_volumes",
            "Network volumes of ours that no PersistentVolume names and no claim waits "
            "for, told every tick from the most recent list: a duplicate is deleted after "
            "the orphan grace, one whose claim is gone kept (to delete by hand if unneeded).",
            registry=self.registry,
        )
        self.ghost_charges = Gauge(
            "reconciler_charged_gone_resources",
            "Ids RunPod charged in the last hour it neither lists nor answers for "
            "(instances, network volumes, clusters; anyone's): told without the database, "
            "from RunPod's own billing, once an hour.",
            registry=self.registry,
        )
        self.ghost_charges_usd = Gauge(
            "reconciler_charged_gone_usd",
            "USD RunPod charged for them in the last hour read.",
            registry=self.registry,
        )
        self.leaked_seconds = Counter(
            "reconciler_leaked_instance_seconds",
            "Seconds our instances lived on after their pods ended and the grace passed, "
            "until terminated again (leaks found by the billing audit).",
            registry=self.registry,
        )
        self._leak_counted: dict[str, float] = {}
        """Seconds already counted per leaked instance: one found again (it billed on
        after being terminated) adds only its new seconds."""
        self.spend = Gauge(
            "reconciler_spend_usd_total",
            "USD RunPod charged for our instances, by namespace (billing, "
            "whole hours, within --cost-history).",
            ["namespace"],
            registry=self.registry,
        )
        self.price_differences = Counter(
            "reconciler_spend_mismatched_pods",
            "Pods whose RunPod charge was found more than 10% away from list price times "
            "their instance's life (each difference counted once, when a billing read "
            "finds it).",
            registry=self.registry,
        )
        self.gpu_utilization = GpuGauge()
        self.registry.register(self.gpu_utilization)
        self.clusters = Gauge(
            "reconciler_owned_clusters",
            "Instant Clusters of ours (our owner tag in their members' env), as last listed.",
            registry=self.registry,
        )
        self.cluster_members = Gauge(
            "reconciler_owned_cluster_members",
            "Members of the Instant Clusters of ours, as last listed (each a billed pod).",
            registry=self.registry,
        )
        self.clusters_created = Counter(
            "reconciler_clusters_created",
            "Instant Clusters created for gangs (an Indexed Job's pods run together).",
            registry=self.registry,
        )
        self.clusters_deleted = Counter(
            "reconciler_clusters_deleted",
            "Instant Clusters deleted, by why (the terminations' reasons).",
            ["reason"],
            registry=self.registry,
        )
        self.leaked_clusters = Gauge(
            "reconciler_leaked_clusters",
            "Instant Clusters of ours that no gang of a Job on the node has run for the "
            "orphan grace (their deletion failing, or without our gang tag), as last "
            "listed: each logged as an error.",
            registry=self.registry,
        )
        self.registries_deleted = Counter(
            "reconciler_registry_credentials_deleted",
            "Our registry credentials deleted once no pod used them.",
            registry=self.registry,
        )

    def runpod_response(self, route: str, status: int) -> None:
        """The RunPod client's `on_response` hook; `route` is "GET /v2/pods/{id}"."""
        method, _, template = route.partition(" ")
        self.runpod_requests.labels(method, template, str(status)).inc()

    def observe(self, report: TickReport, rate_budget: int | None, owner_id: str) -> None:
        self.tick_seconds.observe(report.duration)
        self.ticks.labels("ok" if report.ok else "failed").inc()
        for kind, count in report.applied.items():
            self.actions.labels(kind, "applied").inc(count)
        for kind, count in report.failed.items():
            self.actions.labels(kind, "failed").inc(count)
        if report.ok:
            self.pods.set(report.pods)
            self.instances.set(report.instances)
        if report.observation is not None:
            observation = report.observation
            owned = ownership_of(observation, owner_id).owned
            # Lists, not generators: these run over every pod and instance each tick.
            self.hourly_cost.set(sum([i.cost_per_hr for group in owned.values() for i in group]))
            pods = {podinfo.uid(pod) for pod in observation.pods}
            self.without_pods.set(sum([len(owned[uid]) for uid in owned.keys() - pods]))
            self.gpu_utilization.keep(report.gpus)
        self._count_healing(report.done)
        self._count_clusters(report, owner_id)
        self._count_money(report)
        self._time_starts(report)
        if rate_budget is not None:
            self.rate_budget.set(rate_budget)

    def _count_healing(self, done: Iterable[Action]) -> None:
        for action in done:
            if isinstance(action, Terminate):
                self._count_terminate(action.reason)
            elif isinstance(action, SaveRow) and action.row.orphan_sightings == 1:
                self.orphans_found.inc()  # the first of the two sightings before terminating

    def _count_clusters(self, report: TickReport, owner_id: str) -> None:
        self.clusters_created.inc(len(ClusterSection.of(report).created))
        for action in report.done:
            if isinstance(action, DeleteCluster):
                self.clusters_deleted.labels(action.reason.value).inc()
        if report.observation is not None:
            ours = [m for m in report.observation.members if m.owner == owner_id]
            self.clusters.set(len({m.cluster_id for m in ours}))
            self.cluster_members.set(len(ours))
            self.leaked_clusters.set(len(ClusterSection.of(report).leaks))

    def _count_money(self, report: TickReport) -> None:
        for action in report.done:
            if isinstance(action, RestoreTags):
                self.tags_restored.inc()
            elif isinstance(action, Terminate) and action.leaked_seconds:
                counted = self._leak_counted.get(action.instance_id, 0.0)
                self.leaked_seconds.inc(max(0.0, action.leaked_seconds - counted))
                self._leak_counted[action.instance_id] = max(counted, action.leaked_seconds)
        self.registries_deleted.inc(len(RegistrySection.of(report).deleted))
        self.price_differences.inc(len(report.billing.differences))
        if report.observed:
            self.lookalikes.set(len(report.lookalikes))
        volume_leaks = VolumeSection.of(report).leaks
        if volume_leaks is not None:
            self.leaked_volumes.set(len(volume_leaks))
        if report.ghost_charges is not None:
            self.ghost_charges.set(len(report.ghost_charges))
            self.ghost_charges_usd.set(sum(g.usd for g in report.ghost_charges))
        if report.billing.spend_by_pod and report.observation is not None:
            namespaces = {row.pod_uid: row.namespace for row in report.observation.rows}
            totals: dict[str, float] = {}
            for uid, usd in report.billing.spend_by_pod.items():
                namespace = namespaces.get(uid, "")
                totals[namespace] = totals.get(namespace, 0.0) + usd
            for namespace, usd in totals.items():
                self.spend.labels(namespace).set(usd)

    def _count_terminate(self, reason: TerminateReason) -> None:
        match reason:
            case TerminateReason.DUPLICATE:
                self.duplicates_healed.inc()
            case TerminateReason.ORPHAN:
                self.orphans_terminated.inc()
            case TerminateReason.START_FAILED:
                self.starts_failed.inc()
            case (
                TerminateReason.POD_DELETED
                | TerminateReason.POD_ENDED
                | TerminateReason.PROCESS_ENDED
                | TerminateReason.POD_FAILED
                | TerminateReason.ALREADY_DECIDED
            ):
                pass  # the pod's own end: counted by the actions metric
            case TerminateReason.LEAK:
                pass  # counted in seconds by _count_money
            case _:
                assert_never(reason)

    def _time_starts(self, report: TickReport) -> None:
        """Pods whose patch this tick turned them Running (they were not before)."""
        started = [
            a
            for a in report.done
            if isinstance(a, PatchStatus) and a.status.get("phase") == "Running"
        ]
        if report.observation is None or report.finished_at is None or not started:
            return  # a steady tick: spare the index of every pod
        before = {podinfo.uid(p): p for p in report.observation.pods}
        for action in started:
            pod = before.get(action.pod.uid)
            if pod is None or podinfo.phase(pod) == "Running":
                continue
            created = podinfo.created_at(pod)
            if created is not None:
                self.pending_to_running.observe(_seconds(created, report.finished_at))


def _seconds(start: datetime, end: datetime) -> float:
    # Clocks of two machines: a pod stamped a little in our future took no time, not less.
    return max(0.0, (end - start).total_seconds())
