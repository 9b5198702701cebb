"""Instant Clusters' steps: a gang's cluster made and deleted (`core.plan.gangs` decides;
docs/architecture.md §3, "Instant Clusters"), each call journaled.

A cluster's create follows an instance's: the gang's intent row committed before the
first POST, each refusal read from `core.capacity.refusals`; its delete waits while the gang's end
is not on its pods (a status patch of this run failed), so a lost database never reruns
a gang that finished. A `--once` run writes each new cluster's id on its gang's pods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.core.actions import (
    Action,
    CreateCluster,
    DeleteCluster,
    DeleteClusterRow,
    PodRef,
    SaveClusterRow,
)
from reconciler.core.capacity.refusals import REFUSALS, Next
from reconciler.core.capacity.stock import StockMemory
from reconciler.core.cluster_row import ClusterRow, ClusterState
from reconciler.core.domain import ClusterRequest, GpuType, Instance, KubeObject
from reconciler.core.money import attribution
from reconciler.core.plan import gang_end
from reconciler.core.plan.observation import CreateInputs, Observation, Observed
from reconciler.core.pods import podinfo
from reconciler.core.reasons import Notice, PodReason
from reconciler.core.resources import cluster_age, clusters
from reconciler.core.resources.clusters import CLUSTER_ID
from reconciler.runtime.tick import crashpoints
from reconciler.runtime.tick.by_id import ReadById, believed, read_by_id
from reconciler.runtime.tick.catalog import CLUSTER_CATALOG, CatalogCache, cluster_catalog
from reconciler.runtime.tick.money import billing
from reconciler.runtime.tick.refusal_kinds import refusal_kind
from reconciler.runtime.tick.resources.base import AfterPods, AlreadyTold, Shared, Sighting
from reconciler.runtime.tick.resources.cluster_billing import cluster_billing
from reconciler.runtime.tick.resources.gang_jobs import GangJobs
from reconciler.runtime.tick.resources.sections import ClusterSection
from reconciler.runtime.tick.run_context import RunContext
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)


class ClusterSteps:
    actions: tuple[type[Action], ...] = (
        CreateCluster,
        DeleteCluster,
        SaveClusterRow,
        DeleteClusterRow,
    )

    def __init__(
        self,
        context: RunContext,
        failing: set[str] | None = None,
        keep_log: Callable[[PodRef, str, str], None] = lambda _pod, _job, _member: None,
    ) -> None:
        self.context = context
        self.keep_log = keep_log
        """Keeps a gang pod's last lines from its member (pod, Job UID, member id)."""
        self.failing = set() if failing is None else failing
        """Clusters whose DELETE failed and was told (kept by the resource across runs)."""
        self.refusals = 0
        """Candidates RunPod refused and the next one was tried (stock, mostly)."""
        self.created: list[str] = []
        """Ids of the Instant Clusters RunPod made for this run's CreateCluster actions."""
        self._gangs: list[tuple[tuple[PodRef, ...], str]] = []

    def apply(self, action: Action) -> None:
        match action:
            case CreateCluster():
                self._create(action)
            case DeleteCluster():
                self._delete(action)
            case SaveClusterRow(row=row):
                self.context.writes.save_cluster(row)
            case DeleteClusterRow(gang=gang):
                self.context.writes.delete_cluster(gang)

    def unrecorded(self) -> int:
        """Each answered create's cluster id onto its gang's pods (`--once`); a gang
        not written on every pod counts as a create its next writer cannot see."""
        unrecorded = 0
        for pods, cluster_id in self._gangs:
            written = [
                self.context.annotate_created and self._annotate(p, cluster_id) for p in pods
            ]
            if not all(written):
                unrecorded += 1
        return unrecorded

    def _create(self, action: CreateCluster) -> None:
        """The gang's intent row, committed before the first POST; then the candidates in
        order, each refusal read from `core.capacity.refusals` as for an instance. An answer lost
        leaves the row `creating`: the members are found by their tags."""
        if self.context.creates_wait():
            self.context.deferred += 1
            return
        self.context.writes.save_cluster(action.row)
        refused: list[str] = []
        for candidate in action.candidates:
            try:
                cluster_id = self._create_one(action, candidate)
            except runpod_errors.RunPodError as exc:
                kind = refusal_kind(exc)
                if kind is None:
                    self.context.in_doubt += 1
                    raise
                refusal = REFUSALS[kind]
                message = refusal.message.format(error=exc, detail=exc.detail or exc, template=None)
                if refusal.next is Next.TRY_NEXT:
                    refused.append(f"{candidate.gpu_type_id}: {message}")
                    self.refusals += 1
                    continue
                if refusal.next is Next.STOP_CREATES:
                    self.context.creates_stopped = message
                self._refused(action, refusal.reason, message)
                return
            self._created(action, candidate, cluster_id)
            return
        self._refused(
            action,
            PodReason.CAPACITY_UNAVAILABLE,
            "no GPU type that fits this gang could be made a cluster: " + "; ".join(refused),
        )

    def _create_one(self, action: CreateCluster, candidate: ClusterRequest) -> str:
        made = self.context.journaled(
            "create-cluster",
            action.pods[0].uid if action.pods else None,
            None,
            lambda: self.context.runpod.clusters.create(candidate),
            durable_at="after-cluster-intent",
            made=lambda cluster_id: cluster_id,
        )
        assert isinstance(made, str)
        crashpoints.reached("after-cluster-create")
        return made

    def _created(self, action: CreateCluster, candidate: ClusterRequest, cluster_id: str) -> None:
        # Committed with a later write: lost in a crash, the cluster is adopted by its tags.
        self.context.writes.save_cluster(
            action.row.changed(
                state=ClusterState.RUNNING,
                cluster_id=cluster_id,
                gpu_type_id=candidate.gpu_type_id,
                pod_count=candidate.pod_count,
                cost_per_hr=candidate.hourly_price,
                reason=None,
                message=None,
                updated_at=self.context.clock(),
            )
        )
        self.created.append(cluster_id)
        self._gangs.append((action.pods, cluster_id))
        size = f"{candidate.pod_count} x {candidate.gpu_type_id} x{candidate.gpu_count_per_pod}"
        for pod in action.pods:
            self.context.event(
                pod,
                Notice.CREATED_CLUSTER,
                f"created RunPod Instant Cluster {cluster_id} ({size}, "
                f"${candidate.hourly_price:.2f}/h in all)",
            )
        self.context.decided(
            "create-cluster", action.pods[0] if action.pods else None, cluster_id, size
        )

    def _refused(self, action: CreateCluster, reason: PodReason | None, message: str) -> None:
        """Nothing was made: the gang waits (the planner shows the reason), tried again
        after the refusal pause; a rate limit blames no one."""
        if reason is None:
            self.context.writes.delete_cluster(action.row.gang)
            return
        self.context.writes.save_cluster(
            action.row.changed(
                state=ClusterState.REFUSED,
                reason=reason,
                message=message,
                updated_at=self.context.clock(),
            )
        )
        for pod in action.pods:
            self.context.event(pod, reason, message, warning=True)

    def _delete(self, action: DeleteCluster) -> None:
        if action.row is not None:
            self.context.writes.save_cluster(action.row)
        # Kept first, even when the DELETE waits: a later tick's DELETE (from the row,
        # `gang_end.settle_recorded`) knows no members to keep lines of.
        for pod, member, job in action.logs:
            self.keep_log(pod, job, member)
        unpatched = [p for p in action.pods if p.uid in self.context.status_failed]
        if unpatched:
            # The row keeps the end (state deleting, no answer yet): the next tick
            # patches the pods from it, then sends this DELETE at once.
            log.warning(
                "not deleting cluster %s yet: the gang's end is not on pod %s (the status "
                "patch failed); the next tick patches it again, then deletes",
                action.cluster_id,
                unpatched[0],
            )
            return
        try:
            self.context.journaled(
                "delete-cluster",
                action.pods[0].uid if action.pods else None,
                action.cluster_id,
                lambda: self.context.runpod.clusters.delete(action.cluster_id),
                durable_at="after-cluster-deleting",
            )
        except runpod_errors.RunPodError as exc:
            self._failed_delete(action.cluster_id, exc)
        self.failing.discard(action.cluster_id)
        crashpoints.reached("after-cluster-delete")
        if action.row is not None:  # lost in a crash: one more DELETE, answered with 404
            self.context.writes.save_cluster(
                action.row.changed(delete_answered_at=self.context.clock())
            )
        for pod in action.pods:
            self.context.event(
                pod,
                Notice.TERMINATING_INSTANCE,
                f"deleted cluster {action.cluster_id}: {action.detail}",
            )
        self.context.decided("delete-cluster", None, action.cluster_id, action.detail)

    def _failed_delete(self, cluster_id: str, exc: runpod_errors.RunPodError) -> None:
        """A DELETE RunPod did not answer: asked again every tick while the cluster is
        listed, told once (per process) rather than on every tick."""
        if cluster_id not in self.failing:
            self.failing.add(cluster_id)
            log.error(
                "could not delete Instant Cluster %s: %s; it may bill until a DELETE "
                "succeeds, which is asked again on every tick (said once)",
                cluster_id,
                exc,
            )
        raise AlreadyTold(f"deleting cluster {cluster_id} failed: {exc}") from exc

    def _annotate(self, pod: PodRef, cluster_id: str) -> bool:
        """A new cluster's id onto a pod of its gang, as the executor does for
        an instance: a writer on another database reads its members by that id (checked
        by their tags) while the list lags. True if written."""
        try:
            self.context.journaled(
                "patch-metadata",
                pod.uid,
                cluster_id,
                lambda: self.context.kube.pods.patch_annotations(
                    pod.namespace, pod.name, {CLUSTER_ID: cluster_id}
                ),
            )
        except kube_errors.KubeError as exc:
            log.warning("could not write cluster %s onto %s: %s", cluster_id, pod, exc)
            return False
        return True


class Clusters:
    """Instant Clusters as a resource of the tick."""

    def __init__(self, shared: Shared) -> None:
        self.settings, self.runpod, self.store = shared.settings, shared.runpod, shared.store
        self.pod_logs, self.attributions = shared.pod_logs, shared.attributions
        self._failing: set[str] = set()
        self.cluster_catalog: CatalogCache[GpuType] = CatalogCache(
            self.settings.timing.catalog_ttl,
            StockMemory(),
            self.settings.placement.datacenter_ids,
            cluster_catalog,
            "GPU catalog of Instant Cluster stock",
            self._keep_catalog,
        )
        """Cluster stock (`product=CLUSTER`), read (cached) only while a gang forms."""
        self._rows_left: bool | None = None
        """Whether the last read found gangs' rows (None: not read yet in this process)."""
        self._first_kept: dict[str, datetime] | None = None
        """The undated clusters' first sightings as the store keeps them (None: not read)."""
        self._gang_pods: frozenset[str] | None = None
        """The node's gang pods at the last tick (their kept lines are checked on a change)."""
        self.jobs = GangJobs(shared.kube)

    def steps(self, context: RunContext) -> ClusterSteps:
        return ClusterSteps(
            context, self._failing, lambda pod, job, member: self.pod_logs.keep(pod, member, job)
        )

    def plan(self, observation: Observation, now: datetime) -> Sequence[Action]:
        return ()  # the planner plans its actions

    def billing(self) -> billing.BillingRoute:
        return cluster_billing(self.runpod, self.store, self.settings)

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        return {}  # a cluster's price is counted from its row with the gang's pods

    def planned(self, report: TickReport) -> None:
        """The leak audit: clusters of ours no Job's gang runs, from this tick's reads."""
        observation = report.observation
        if observation is None:
            return
        leaks = billing.audit_clusters(
            clusters.unrun(
                observation.members,
                observation.gang_pods,
                self.settings.owner_id,
                observation.gang_jobs_unread,
                observation.clusters_first_listed,
            ),
            self.settings.timing.orphan_grace_time,
            report.started_at,
            clusters.deleting(observation.clusters, report.actions),
        )
        report.sections[ClusterSection] = ClusterSection(leaks=leaks)

    def after_pods(self, tick: AfterPods) -> None:
        report = tick.report
        steps = tick.steps_of(ClusterSteps)
        section = ClusterSection.of(report)
        section.created = steps.created
        report.sections[ClusterSection] = section
        if steps.refusals:  # a create refused for want of stock: the stock read is stale
            self.cluster_catalog.mark_stale()
        try:
            self._record_owners(report)
            self._forget_logs(report)
        except Exception as exc:  # derived data: the tick goes on
            report.errors.append(f"saving clusters' owners or logs: {exc}")
            log.error("could not save clusters' owners or logs: %s", exc, exc_info=True)
        try:
            self._keep_first_listed(report)
        except Exception as exc:  # kept on a later tick; till then no age counts from it
            report.errors.append(f"keeping when undated clusters were first listed: {exc}")
            log.error("could not keep when undated clusters were first listed: %s", exc)

    def _keep_catalog(self, entries: list[GpuType], now: datetime) -> None:
        """The cluster stock for `reconciler offers` on a gang (one write per fetch)."""
        try:
            self.store.catalogs.save(entries, now, CLUSTER_CATALOG)
        except Exception as exc:  # derived data: the tick goes on
            log.warning("could not keep the cluster catalog for `reconciler offers`: %s", exc)

    def _forget_logs(self, report: TickReport) -> None:
        """The kept lines of gang pods no longer on the node, looked for only on a tick
        whose gang pods differ from the last one's (no database read in a steady tick)."""
        observation = report.observation
        if observation is None:
            return
        uids = frozenset(podinfo.uid(pod) for pod in observation.gang_pods)
        if uids == self._gang_pods:
            return
        gone = self.store.saved_logs.member_pods() - uids
        self.store.saved_logs.forget_members(sorted(gone))
        self._gang_pods = uids

    def _record_owners(self, report: TickReport) -> None:
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

    def observe(self, sighting: Sighting) -> None:
        """The members (in the tick's one list, or read by id while it lags), the gangs'
        rows, what a forming gang's create needs, and rank 0's exit code where due."""
        # Members come in the one list; only the gangs' planning looks at them.
        members = [i for i in sighting.listed if i.cluster_id is not None]
        # Rows are read while a gang or its rows are around (a row outlives its pods
        # for a tick: forgotten by the planning, which needs to see it).
        busy = sighting.gang_pods or members or self._rows_left is not False
        rows = self.store.load_clusters() if busy else []
        self._rows_left = bool(rows)
        # Only a pod of a Job of its own namespace joins a gang: the rest is not looked at.
        jobs = self.jobs.sort(sighting.gang_pods, rows)
        sighting.gang_pods = gang_pods = jobs.theirs
        members, gone = self._confirmed(members, rows, gang_pods)
        first_listed = self._first_listed(members, sighting.now)
        inputs = self._gang_inputs(sighting, members)
        results, unread = self._gang_results(gang_pods, members, rows, sighting.now)
        stock = self.cluster_catalog.get(self.runpod, sighting.now) if inputs else []
        sighting.found.update(
            Observed(
                cluster_catalog=stock,
                foreign_gang_pods=jobs.foreign,
                gang_jobs_unread=jobs.unread,
                members=members,
                clusters=rows,
                gang_inputs=inputs,
                gang_results=results,
                gang_unread=unread,
                clusters_gone=gone,
                clusters_first_listed=first_listed,
            )
        )
        sighting.wants_gpus |= bool(inputs)
        sighting.creating += [p for p in gang_pods if clusters.job_uid(p) in inputs]

    def _first_listed(self, members: Sequence[Instance], now: datetime) -> dict[str, datetime]:
        """When a list first showed each undated cluster of ours (`core.resources.cluster_age`):
        as kept in the store, else now (kept once the tick's actions ran, `_keep_first_listed`:
        a dry run writes nothing). The store is read on the process's first tick, then only
        while such a cluster is listed or was."""
        undated = cluster_age.undated(members, self.settings.owner_id)
        if not undated and self._first_kept == {}:
            return {}
        try:
            self._first_kept = self.store.listed_clusters.first_listed()
        except Exception as exc:  # their ages count from now: nothing is judged old
            log.error("could not read when undated clusters were first listed: %s", exc)
            self._first_kept = None
            return {}
        return {cluster_id: self._first_kept.get(cluster_id, now) for cluster_id in undated}

    def _keep_first_listed(self, report: TickReport) -> None:
        """Keep the tick's first sightings of undated clusters, when they changed. A plan
        only ever judged a cluster old by a sighting kept before it."""
        first = report.observation.clusters_first_listed if report.observation else None
        if first is None or self._first_kept is None or first == self._first_kept:
            return
        self.store.listed_clusters.keep(first)
        self._first_kept = dict(first)

    def _confirmed(
        self,
        listed: Sequence[Instance],
        rows: Sequence[ClusterRow],
        gang_pods: Sequence[KubeObject],
    ) -> tuple[list[Instance], frozenset[str]]:
        """The members, with those of each cluster a live gang records that the list
        omits or shows without its tags read by id (`GET /v2/clusters/{id}/pods`, one per
        cluster, none in a steady tick), with those we are deleting; and the clusters
        RunPod answered 404 for."""
        doubted = clusters.unlisted(rows, gang_pods, listed, self.settings.owner_id)
        read = read_by_id(doubted, self.runpod.clusters.members)
        flat = ReadById([m for members in read.found for m in members], read.gone, read.asked)
        return believed(listed, flat, _cluster_of), read.gone

    def _gang_inputs(
        self, sighting: Sighting, members: Sequence[Instance]
    ) -> dict[str, CreateInputs]:
        """The Job and env sources of each gang with no cluster of ours listed: read
        while it forms (Kubernetes reads only), never while its cluster runs."""
        running = {
            clusters.key_job(gang)
            for gang in clusters.members_by_gang(members, self.settings.owner_id)
        }
        first: dict[str, KubeObject] = {}
        for pod in sorted(sighting.gang_pods, key=lambda p: clusters.index_of(p) or 0):
            job = clusters.job_uid(pod)
            live = not podinfo.is_finished(pod) and not podinfo.is_deleting(pod)
            if job is not None and live and job not in running:
                first.setdefault(job, pod)
        inputs = sighting.create_inputs(list(first.values()))
        return {
            job: inputs[podinfo.uid(pod)]
            for job, pod in first.items()
            if podinfo.uid(pod) in inputs
        }

    def _gang_results(
        self,
        gang_pods: Sequence[KubeObject],
        members: Sequence[Instance],
        rows: Sequence[ClusterRow],
        now: datetime,
    ) -> tuple[dict[str, int | None], frozenset[str]]:
        """Rank 0's exit code of each running gang due a read (`gang_end.due_reads`):
        one log request per running gang per --gang-result-interval; and the gangs whose
        read failed."""
        if not members:
            return {}, frozenset()
        due = gang_end.due_reads(
            clusters.members_by_gang(members, self.settings.owner_id),
            {row.gang: row for row in rows},
            clusters.live_gangs(gang_pods),
            self.settings.timing.gang_result_interval,
            now,
        )
        results = self.pod_logs.read_results(due) if due else {}
        return results, frozenset(due.keys() - results.keys())


def _cluster_of(member: Instance) -> str | None:
    return member.cluster_id
