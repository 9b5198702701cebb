"""Instant Clusters' steps: a gang's cluster made and deleted (`core.plan.gangs` decides;
docs/architecture.md §3, "Instant Clusters"), each call journaled.

A cluster's create follows an instance's: the gang's intent row committed before the
first POST, each refusal read from `core.capacity.refusals`; its delete waits while the gang's end
is not on its pods (a status patch of this run failed), so a lost database never reruns
a gang that finished. A `--once` run writes each new cluster's id on its gang's pods.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
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
from reconciler.core.cluster_record import ClusterRecord, ClusterState
from reconciler.core.domain import ClusterRequest, Instance, KubeObject
from reconciler.core.money import attribution
from reconciler.core.plan import gang_end
from reconciler.core.plan.observation import CreateInputs
from reconciler.core.pods import facts as podinfo
from reconciler.core.reasons import Notice, PodReason
from reconciler.core.resources import clusters
from reconciler.core.resources.clusters import CLUSTER_ID
from reconciler.runtime import crashpoints
from reconciler.runtime.by_id import ReadById, believed, read_by_id
from reconciler.runtime.journal import Journal
from reconciler.runtime.money import chores as money
from reconciler.runtime.refusal_kinds import refusal_kind
from reconciler.runtime.resources.base import AfterPods, Shared, Sighting
from reconciler.runtime.resources.gang_jobs import GangJobs
from reconciler.runtime.tick_report import TickReport

log = logging.getLogger(__name__)


class ClusterSteps:
    actions: tuple[type[Action], ...] = (
        CreateCluster,
        DeleteCluster,
        SaveClusterRow,
        DeleteClusterRow,
    )

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
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
                self.journal.writes.save_cluster(row)
            case DeleteClusterRow(gang=gang):
                self.journal.writes.delete_cluster(gang)

    def unrecorded(self) -> int:
        """Each answered create's cluster id onto its gang's pods (`--once`); a gang
        not written on every pod counts as a create its next writer cannot see."""
        unrecorded = 0
        for pods, cluster_id in self._gangs:
            written = [
                self.journal.annotate_created and self._annotate(p, cluster_id) for p in pods
            ]
            if not all(written):
                unrecorded += 1
        return unrecorded

    def _create(self, action: CreateCluster) -> None:
        """The gang's intent row, committed before the first POST; then the candidates in
        order, each refusal read from `core.capacity.refusals` as for an instance. An answer lost
        leaves the row `creating`: the members are found by their tags."""
        if self.journal.creates_wait():
            self.journal.deferred += 1
            return
        self.journal.writes.save_cluster(action.row)
        refused: list[str] = []
        for candidate in action.candidates:
            try:
                cluster_id = self._create_one(action, candidate)
            except runpod_errors.RunPodError as exc:
                kind = refusal_kind(exc)
                if kind is None:
                    self.journal.in_doubt += 1
                    raise
                refusal = REFUSALS[kind]
                message = refusal.message.format(error=exc, detail=exc.detail or exc, template=None)
                if refusal.next is Next.TRY_NEXT:
                    refused.append(f"{candidate.gpu_type_id}: {message}")
                    continue
                if refusal.next is Next.STOP_CREATES:
                    self.journal.creates_stopped = message
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
        made = self.journal.journaled(
            "create-cluster",
            action.pods[0].uid if action.pods else None,
            None,
            lambda: self.journal.runpod.clusters.create(candidate),
            durable_at="after-cluster-intent",
        )
        assert isinstance(made, str)
        crashpoints.reached("after-cluster-create")
        return made

    def _created(self, action: CreateCluster, candidate: ClusterRequest, cluster_id: str) -> None:
        # Committed with a later write: lost in a crash, the cluster is adopted by its tags.
        self.journal.writes.save_cluster(
            action.row.changed(
                state=ClusterState.RUNNING,
                cluster_id=cluster_id,
                gpu_type_id=candidate.gpu_type_id,
                pod_count=candidate.pod_count,
                cost_per_hr=candidate.hourly_price,
                reason=None,
                message=None,
                updated_at=self.journal.clock(),
            )
        )
        self.created.append(cluster_id)
        self._gangs.append((action.pods, cluster_id))
        size = f"{candidate.pod_count} x {candidate.gpu_type_id} x{candidate.gpu_count_per_pod}"
        for pod in action.pods:
            self.journal.event(
                pod,
                Notice.CREATED_CLUSTER,
                f"created RunPod Instant Cluster {cluster_id} ({size}, "
                f"${candidate.hourly_price:.2f}/h in all)",
            )
        self.journal.decided(
            "create-cluster", action.pods[0] if action.pods else None, cluster_id, size
        )

    def _refused(self, action: CreateCluster, reason: PodReason | None, message: str) -> None:
        """Nothing was made: the gang waits (the planner shows the reason), tried again
        after the refusal pause; a rate limit blames no one."""
        if reason is None:
            self.journal.writes.delete_cluster(action.row.gang)
            return
        self.journal.writes.save_cluster(
            action.row.changed(
                state=ClusterState.REFUSED,
                reason=reason,
                message=message,
                updated_at=self.journal.clock(),
            )
        )
        for pod in action.pods:
            self.journal.event(pod, reason, message, warning=True)

    def _delete(self, action: DeleteCluster) -> None:
        if action.row is not None:
            self.journal.writes.save_cluster(action.row)
        unpatched = [p for p in action.pods if p.uid in self.journal.status_failed]
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
        self.journal.journaled(
            "delete-cluster",
            action.pods[0].uid if action.pods else None,
            action.cluster_id,
            lambda: self.journal.runpod.clusters.delete(action.cluster_id),
            durable_at="after-cluster-deleting",
        )
        crashpoints.reached("after-cluster-delete")
        if action.row is not None:  # lost in a crash: one more DELETE, answered with 404
            self.journal.writes.save_cluster(
                action.row.changed(delete_answered_at=self.journal.clock())
            )
        for pod in action.pods:
            self.journal.event(
                pod,
                Notice.TERMINATING_INSTANCE,
                f"deleted cluster {action.cluster_id}: {action.detail}",
            )
        self.journal.decided("delete-cluster", None, action.cluster_id, action.detail)

    def _annotate(self, pod: PodRef, cluster_id: str) -> bool:
        """A new cluster's id onto a pod of its gang, as the executor does for
        an instance: a writer on another database reads its members by that id (checked
        by their tags) while the list lags. True if written."""
        try:
            self.journal.journaled(
                "patch-metadata",
                pod.uid,
                cluster_id,
                lambda: self.journal.kube.pods.patch_annotations(
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
        self.jobs = GangJobs(shared.kube)

    def steps(self, journal: Journal) -> ClusterSteps:
        return ClusterSteps(journal)

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        return {}  # a cluster's price is counted from its row with the gang's pods

    def planned(self, report: TickReport) -> None:
        """The leak audit: clusters of ours no Job's gang runs, from this tick's reads."""
        observation = report.observation
        if observation is None:
            return
        report.cluster_leaks = money.audit_clusters(
            clusters.unrun(
                observation.members,
                observation.gang_pods,
                self.settings.owner_id,
                observation.gang_jobs_unread,
            ),
            self.settings.timing.orphan_grace_time,
            report.started_at,
        )

    def after_pods(self, tick: AfterPods) -> None:
        report = tick.report
        report.clusters_created = tick.steps_of(ClusterSteps).created
        try:
            self._record_owners(report)
        except Exception as exc:  # derived data: the tick goes on
            report.errors.append(f"saving clusters' owners: {exc}")
            log.error("could not save clusters' owners: %s", exc, exc_info=True)

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
        rows = self.store.load_clusters() if sighting.gang_pods or members else []
        # Only a pod of a Job of its own namespace joins a gang: the rest is not looked at.
        jobs = self.jobs.sort(sighting.gang_pods, rows)
        sighting.gang_pods = gang_pods = jobs.theirs
        members = self._confirmed(members, rows, gang_pods)
        inputs = self._gang_inputs(sighting, members)
        results, unread = self._gang_results(gang_pods, members, rows, sighting.now)
        sighting.found.update(
            foreign_gang_pods=jobs.foreign,
            gang_jobs_unread=jobs.unread,
            members=members,
            clusters=rows,
            gang_inputs=inputs,
            gang_results=results,
            gang_unread=unread,
        )
        sighting.wants_gpus |= bool(inputs)
        sighting.creating += [p for p in gang_pods if clusters.job_uid(p) in inputs]

    def _confirmed(
        self,
        listed: Sequence[Instance],
        rows: Sequence[ClusterRecord],
        gang_pods: Sequence[KubeObject],
    ) -> list[Instance]:
        """The members, with those of each cluster a live gang records that the list
        omits or shows without its tags read by id (`GET /v2/clusters/{id}/pods`, one per
        cluster, none in a steady tick)."""
        doubted = clusters.unlisted(rows, gang_pods, listed, self.settings.owner_id)
        read = read_by_id(doubted, self.runpod.clusters.members)
        flat = ReadById([m for members in read.found for m in members], read.gone, read.asked)
        return believed(listed, flat, _cluster_of)

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
        rows: Sequence[ClusterRecord],
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
