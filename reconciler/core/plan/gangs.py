"""Gangs: an Indexed Job's pods run as one RunPod Instant Cluster (`core.resources.clusters` says
which pods, and how a cluster is known as ours; docs/architecture.md §3).

Per Job, each tick:

- clusters of the Job made for an earlier gang (the pods changed) are deleted, and the
  live pods that ran in them are failed: no member runs alone;
- a member that failed (or vanished) fails the whole gang and deletes its cluster, so
  the Job's backoff makes the gang again; so do rank 0's result and the pods' deadline
  (`plan.gang_end`: a gang's end is recorded in its row before the DELETE, and its
  pods get it from there);
- a deleted pod is finished like a kubelet once its cluster is gone from the list;
- while the gang has no cluster, its pods wait (with a reason) until all N are on the
  node, the Job qualifies and no create is in flight; then one create is planned;
- once the cluster is listed, index i mirrors the member of rank i: its status (no pod
  IP: the overlay address leads nowhere from the cluster), rank and id.

Clusters of ours whose Job has no pod left on the node are collected after the orphan
grace. Nothing without our owner tag is ever touched.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.core.actions import (
    Action,
    CreateCluster,
    DeleteCluster,
    DeleteClusterRow,
    Event,
    PatchStatus,
    PodRef,
    SaveClusterRow,
)
from reconciler.core.capacity.refusals import GANG_REFUSALS, REFUSAL_RETRY_SECONDS, GangRefusal
from reconciler.core.domain import Instance, KubeObject
from reconciler.core.plan import gang_end, hourly_costs
from reconciler.core.plan.admission import priced
from reconciler.core.plan.gang_collect import collect
from reconciler.core.plan.observation import CreateInputs
from reconciler.core.plan.outcomes import gave_up, waited_too_long
from reconciler.core.plan.situation import Situation
from reconciler.core.pods import podinfo
from reconciler.core.reasons import PodReason, TerminateReason
from reconciler.core.resources import cluster_age, clusters
from reconciler.core.resources.clusters import (
    CLUSTER_ID,
    RANK,
    ClusterRow,
    ClusterState,
    GangJob,
    gang_key,
    index_of,
    is_live,
    job_name,
    job_of,
    members_by_gang,
)
from reconciler.core.translate import status as pod_status
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.request import create_requests


def plan_gangs(tick: Situation) -> list[Action]:
    members = members_by_gang(tick.obs.members, tick.settings.owner_id)
    rows = {row.gang: row for row in tick.obs.clusters}
    by_job: dict[GangJob, list[KubeObject]] = {}
    actions: list[Action] = _foreign(tick)
    for pod in tick.obs.gang_pods:
        owner = job_of(pod)
        if owner is None:
            message = GANG_REFUSALS[GangRefusal.NOT_A_JOB]
            actions += _wait(tick, [pod], PodReason.INVALID_CLUSTER_JOB, message)
        else:
            by_job.setdefault(owner, []).append(pod)
    members_of, rows_of = clusters.by_job(members), clusters.by_job(rows)
    listed_ids = {m.cluster_id for group in members.values() for m in group}
    current: set[str] = set()
    for (_, uid), pods in by_job.items():
        decided, key = _gang(
            tick, uid, pods, members_of.get(uid, {}), rows_of.get(uid, {}), listed_ids
        )
        actions += decided
        current.add(key)
    jobs = {uid for _, uid in by_job} | tick.obs.gang_jobs_unread
    staying = {uid for (_, uid), ps in by_job.items() if not all(map(podinfo.is_deleting, ps))}
    staying |= tick.obs.gang_jobs_unread
    return actions + collect(tick, members, rows, (jobs, staying), current)


def _foreign(tick: Situation) -> list[Action]:
    """Pods whose ownerReference names no Job of their namespace: in no gang (so a Job
    UID is one namespace's in all the rest), told why; finished at once when deleted."""
    foreign = tick.obs.foreign_gang_pods
    actions = gang_end.finalize(tick, [p for p in foreign if podinfo.is_deleting(p)], set())
    for pod in foreign:
        if is_live(pod) and (job := job_of(pod)) is not None:
            actions += _wait(tick, [pod], PodReason.FOREIGN_ID, clusters.job_refusal(job))
    return actions


def _gang(
    tick: Situation,
    job: str,
    pods: list[KubeObject],
    members: Mapping[str, Sequence[Instance]],
    rows: Mapping[str, ClusterRow],
    listed_ids: set[str | None],
) -> tuple[list[Action], str]:
    """One Job's gang: its actions, and its key. `members` and `rows` are the Job's,
    `listed_ids` every cluster the list shows."""
    active = [p for p in pods if is_live(p)]
    actions, active = gang_end.settle_recorded(tick, job, active, rows, listed_ids)
    key = gang_key(job, active)
    recorded = [podinfo.pod_annotations(p).get(CLUSTER_ID) for p in active]
    current, extra = _one_cluster(members.get(key, ()), rows.get(key), recorded)
    grace, first_listed = tick.settings.timing.create_grace_time, tick.obs.clusters_first_listed
    for second, its_members in extra.items():
        if cluster_age.past_grace(tick.now, its_members, first_listed, grace):
            detail = "a second cluster for one gang (an in-doubt create made again)"
            actions += gang_end.delete(tick, second, None, detail, (), TerminateReason.DUPLICATE)
    cluster_id = current[0].cluster_id if current else None
    # A live pod that ran in another cluster of its Job than its gang's has lost its
    # member. The annotation is anyone's to write who may edit the pod: it counts only
    # when it names a cluster of this Job that RunPod lists or a row records; another
    # value is written back by the mirror. Its end goes on it before that cluster goes.
    known = {m.cluster_id for g in members.values() for m in g}
    known |= {r.cluster_id for r in rows.values()}
    # Unless that cluster's rank 0 ended before the pod went (read this tick, one last
    # time): then that is its gang's end, on all its pods, the going one too.
    ended = {
        listed[0].cluster_id: (gang, code)
        for gang, listed in members.items()
        if gang != key and (code := tick.obs.gang_results.get(gang)) is not None
    }
    held, counted = gang_end.unjudged(tick, key, members, rows, pods)
    actions += counted
    judged = [p for p in active if podinfo.pod_annotations(p).get(CLUSTER_ID) not in held]
    broken = [
        p
        for p in judged
        if podinfo.pod_annotations(p).get(CLUSTER_ID) in known - {None, cluster_id, *ended}
    ]
    actions += gang_end.fail(
        tick, broken, "a pod of its gang ended or went, so its cluster was deleted"
    )
    for old, (gang, code) in ended.items():
        ran = [p for p in pods if podinfo.pod_annotations(p).get(CLUSTER_ID) == old]
        ran_in = members.get(gang, ())
        actions += _ended_before_a_pod_went(tick, gang, old, code, ran, rows.get(gang), ran_in)
        active = [p for p in active if p not in ran]
    sent = {a.cluster_id for a in actions if isinstance(a, DeleteCluster)}
    for gang, listed in members.items():
        old = listed[0].cluster_id
        if gang != key and old not in sent | held:
            detail = "the gang it ran changed (a pod of it ended or went)"
            ran = [p for p in broken if podinfo.pod_annotations(p).get(CLUSTER_ID) == old]
            actions += gang_end.delete(tick, old, rows.get(gang), detail, ran)
    actions += gang_end.finalize(tick, [p for p in pods if podinfo.is_deleting(p)], listed_ids)
    healthy = [p for p in judged if p not in broken]
    late = gang_end.deadline_passed(tick, healthy)
    if late is not None and tick.obs.gang_results.get(key) is None:  # a result read wins
        row = rows.get(key) or _new_row(tick, key, healthy, ClusterState.RUNNING)
        unread = gang_end.read_failed(tick, key, row) if cluster_id else None
        if unread is not None:
            return actions + unread, key
        ending = _end_early(tick, key, cluster_id, rows.get(key), late, healthy, current)
        return actions + ending, key
    if held:  # an earlier cluster of the Job may have succeeded: its end is read first
        message = f"waiting for the result of rank 0 of cluster {sorted(map(str, held))[0]}"
        return actions + _wait(tick, healthy, PodReason.CLUSTER_FORMING, message), key
    if current:
        return actions + _run(tick, key, healthy, current, rows.get(key)), key
    done = gang_end.succeeded_before(key, rows, ended)
    if done is not None:
        return actions + gang_end.done_before(tick, healthy, done), key
    return actions + _without_cluster(tick, job, key, healthy, rows.get(key)), key


def _ended_before_a_pod_went(
    tick: Situation,
    gang: str,
    cluster_id: str | None,
    code: int,
    pods: list[KubeObject],
    row: ClusterRow | None,
    members: Sequence[Instance],
) -> list[Action]:
    """Rank 0 of the gang's cluster exited with `code` before one of its pods went: the
    gang ended, as a kubelet shows a container that exited before its pod's deletion."""
    if not pods:
        return []
    base = (row or _new_row(tick, gang, pods, ClusterState.RUNNING)).changed(cluster_id=cluster_id)
    ended = gang_end.result(base, code, tick.now)
    detail = f"rank 0 exited with {code} before a pod of its gang went: the gang ended"
    why = TerminateReason.PROCESS_ENDED
    deleted = gang_end.delete(tick, cluster_id, ended, detail, pods, why, members)
    return [*gang_end.settle(tick, pods, ended), *deleted]


def _end_early(
    tick: Situation,
    key: str,
    cluster_id: str | None,
    row: ClusterRow | None,
    message: str,
    pods: list[KubeObject],
    members: Sequence[Instance],
) -> list[Action]:
    """The gang is past its deadline: its pods fail, its cluster (if any) goes."""
    reason = PodReason.DEADLINE_EXCEEDED
    base = row or _new_row(tick, key, pods, ClusterState.RUNNING)
    ended = gang_end.failure(
        base.changed(cluster_id=cluster_id or base.cluster_id), reason, message
    )
    deleted = gang_end.delete(tick, cluster_id, ended, message, pods, members=members)
    return [*gang_end.fail(tick, pods, message, reason), *deleted]


def _one_cluster(
    listed: Sequence[Instance], row: ClusterRow | None, recorded: Sequence[str | None]
) -> tuple[Sequence[Instance], dict[str, list[Instance]]]:
    """The gang's cluster and any others, with their members: two for one gang are
    an in-doubt create made again, healed as duplicate instances are (docs/architecture.md
    §4). Kept: the one most of the gang's pods record (`recorded`, their
    `runpod.io/cluster-id`: every writer reads the same pods, whatever its database),
    counted only among the clusters RunPod lists with this gang's tags, so an annotation
    alone never chooses; else the one the row names; else the oldest."""
    clusters: dict[str, list[Instance]] = {}
    for member in listed:
        clusters.setdefault(str(member.cluster_id), []).append(member)
    if len(clusters) <= 1:
        return listed, {}
    born = {cid: cluster_age.made(ms) for cid, ms in clusters.items()}
    votes = Counter(cid for cid in recorded if cid in clusters)
    on_pods = votes.most_common(1)[0][0] if votes else None
    named = row.cluster_id if row is not None and row.cluster_id in clusters else None
    keep = on_pods or named or min(clusters, key=lambda cid: (born[cid] is None, born[cid], cid))
    return clusters[keep], {cid: ms for cid, ms in clusters.items() if cid != keep}


def _run(
    tick: Situation,
    key: str,
    pods: list[KubeObject],
    members: Sequence[Instance],
    row: ClusterRow | None,
) -> list[Action]:
    """The gang's cluster is listed: adopt it, mirror each member, or end the gang (a
    member failed, or rank 0's result was read this tick)."""
    cluster_id = str(members[0].cluster_id)
    kept = row
    # A row of this cluster stays as it is once running, or once the gang's end is in it.
    settled = row is not None and (row.state is ClusterState.RUNNING or row.ended)
    if row is None or row.cluster_id != cluster_id or not settled:
        kept = _adopted(tick, key, pods, members, row, cluster_id)
    assert kept is not None
    # Rank 0's result, when read, wins over a member's end: it may have exited first.
    code = tick.obs.gang_results.get(key)
    if code is not None:
        ended = gang_end.result(kept, code, tick.now)
        detail = f"rank 0 exited with {code}: the gang ended"
        deleted = gang_end.delete(
            tick, cluster_id, ended, detail, pods, TerminateReason.PROCESS_ENDED, members
        )
        return [*gang_end.settle(tick, pods, ended), *deleted]
    broken = gang_end.member_ended(members, kept)
    if broken is not None:
        unread = gang_end.read_failed(tick, key, kept)
        if unread is not None:
            return unread
        detail = broken
        message = f"{detail}: the gang fails, and its Job makes it again"
        ended = gang_end.failure(kept, PodReason.CLUSTER_MEMBER_FAILED, message)
        return [
            *gang_end.fail(tick, pods, message),
            *gang_end.delete(tick, cluster_id, ended, detail, pods, members=members),
        ]
    if key in tick.obs.gang_results or key in tick.obs.gang_unread:
        kept = kept.changed(result_checked_at=tick.now)  # a failed read waits its interval
    actions: list[Action] = [SaveClusterRow(kept)] if kept != row else []
    by_rank = {m.rank: m for m in members if m.rank is not None}
    for pod in pods:
        index = index_of(pod)
        member = by_rank.get(index) if index is not None else None
        actions += _mirror(tick, pod, member, cluster_id)
    return actions


def _adopted(
    tick: Situation,
    key: str,
    pods: list[KubeObject],
    members: Sequence[Instance],
    row: ClusterRow | None,
    cluster_id: str,
) -> ClusterRow:
    base = row or _new_row(tick, key, pods, ClusterState.RUNNING)
    return base.changed(
        state=ClusterState.RUNNING,
        cluster_id=cluster_id,
        gpu_type_id=members[0].gpu_type_id,
        pod_count=len(members),
        cost_per_hr=round(sum(m.cost_per_hr for m in members), 6),
        reason=None,
        message=None,
        delete_answered_at=None if base.cluster_id != cluster_id else base.delete_answered_at,
        updated_at=tick.now,
    )


def _mirror(
    tick: Situation, pod: KubeObject, member: Instance | None, cluster_id: str
) -> list[Action]:
    """The pod shows its member: status, overlay IP, rank, id (only when that changed)."""
    if member is None:  # ranks are assigned while the cluster provisions
        status = pod_status.pod_status(pod, None, exit_code=None, now=tick.now)
        annotations: dict[str, str | None] = {CLUSTER_ID: cluster_id}
    else:
        # No podIP (pod_status says why): not even the overlay address, unreachable too.
        status = pod_status.pod_status(pod, member, exit_code=None, now=tick.now)
        annotations = {
            **pod_status.metadata_annotations(member),
            CLUSTER_ID: cluster_id,
            RANK: str(member.rank),
        }
    shown = podinfo.pod_annotations(pod)
    changed = {k: v for k, v in annotations.items() if shown.get(k) != v}
    if _shown(status) == _shown(pod.get("status") or {}) and not changed:
        return []
    return [PatchStatus(PodRef.of(pod), status, None, changed)]


def _shown(status: Mapping[str, Any]) -> tuple[object, ...]:
    """What of a status the mirror owns: equal when nothing needs patching."""
    containers = tuple(
        (
            c.get("name"),
            c.get("ready"),
            tuple(sorted((c.get("state") or {}).keys())),
            _state_reason(c.get("state") or {}),
            c.get("restartCount"),
        )
        for c in status.get("containerStatuses") or []
    )
    fields = ("phase", "podIP", "reason", "message")
    return (*(status.get(name) for name in fields), containers)


def _state_reason(state: Mapping[str, Any]) -> object:
    detail = next(iter(state.values()), None)
    return detail.get("reason") if isinstance(detail, Mapping) else None


def _without_cluster(
    tick: Situation, job: str, key: str, pods: list[KubeObject], row: ClusterRow | None
) -> list[Action]:
    """No cluster listed for this gang: wait for its pods, its create, or create it."""
    if not pods:
        return []
    if row is not None and row.state is ClusterState.RUNNING:
        if tick.within(row.updated_at, tick.settings.timing.create_grace_time):
            return []  # just made: the list can lag behind the create
        detail = f"cluster {row.cluster_id} is gone"
        return [DeleteClusterRow(key), *gang_end.fail(tick, pods, f"{detail}: the gang fails")]
    creating = row is not None and row.state is ClusterState.CREATING
    if creating and tick.within(
        row.attempt_started_at if row else None, tick.settings.timing.create_grace_time
    ):
        return []  # in flight or in doubt: its members may yet be listed
    inputs = tick.obs.gang_inputs.get(job)
    if inputs is None or inputs.job is None:
        message = "waiting for the pod's Job to be read"
        return _wait(tick, pods, PodReason.CLUSTER_FORMING, message)
    refused = clusters.why_not_a_cluster(inputs.job, pods)
    if refused is not None:
        return _wait(tick, pods, PodReason.INVALID_CLUSTER_JOB, refused)
    done = clusters.completed_indexes(inputs.job)
    if done:
        shown = ", ".join(str(i) for i in sorted(done)[:5]) + (", ..." if len(done) > 5 else "")
        name = inputs.job["metadata"]["name"]
        why = f"Job {name} completed index {shown} when its gang's rank 0 exited 0"
        return gang_end.done_before(tick, pods, why)
    size = int(inputs.job["spec"]["completions"])
    indexes = sorted(i for i in (index_of(p) for p in pods) if i is not None)
    if indexes != list(range(size)):
        name = inputs.job["metadata"]["name"]
        message = f"waiting for all {size} pods of Job {name} ({len(pods)} on the node)"
        return _wait(tick, pods, PodReason.CLUSTER_FORMING, message)
    refused_lately = row is not None and tick.within(row.updated_at, REFUSAL_RETRY_SECONDS)
    if row is not None and row.state is ClusterState.REFUSED and row.reason and refused_lately:
        return _wait(tick, pods, row.reason, row.message or row.reason.value)
    return _create(tick, key, pods, inputs, row)


def _create(
    tick: Situation,
    key: str,
    pods: list[KubeObject],
    inputs: CreateInputs,
    row: ClusterRow | None,
) -> list[Action]:
    ordered = sorted(pods, key=lambda p: index_of(p) or 0)
    try:
        if inputs.error is not None:
            raise inputs.error
        requests = create_requests(
            ordered[0],
            inputs.job,
            inputs.sources,
            tick.obs.cluster_catalog or tick.obs.catalog,  # ranked on cluster stock
            tick.settings,
            tick.settings.owner_id,
            network_volumes=tick.obs.network_volumes,
            claim=inputs.claim,
        )
        requests = priced(ordered[0], inputs.job, tick.settings, requests)
    except TranslationError as exc:
        return _wait(tick, pods, *clusters.gang_refusal(exc, bool(tick.obs.cluster_catalog)))
    job = str((inputs.job or {}).get("metadata", {}).get("name", ""))
    short = clusters.out_of_cluster_stock(requests, tick.obs.cluster_catalog, job)
    if short is not None:
        return _wait(tick, pods, *short)
    pulls_privately = inputs.pull_secret is not None or bool(inputs.registry_auth_id)
    refused = clusters.why_not_clusterable(requests, job, pulls_privately)
    if refused is not None:
        return _wait(tick, pods, PodReason.INVALID_CLUSTER_JOB, refused)
    candidates = tuple(clusters.cluster_request(r, key, ordered[0], len(pods)) for r in requests)
    namespace = PodRef.of(ordered[0]).namespace
    candidates, over = hourly_costs.admit_cluster(tick, namespace, candidates, len(pods))
    if over is not None:
        return _wait(tick, pods, PodReason.BUDGET_EXCEEDED, over)
    intent = (row or _new_row(tick, key, pods, ClusterState.CREATING)).changed(
        state=ClusterState.CREATING,
        attempt_started_at=tick.now,
        updated_at=tick.now,
        pod_count=len(pods),
        # While the create is in doubt the caps count it at the dearest price tried.
        cost_per_hr=max(c.hourly_price for c in candidates),
    )
    return [CreateCluster(tuple(PodRef.of(p) for p in ordered), intent, candidates)]


def _new_row(tick: Situation, key: str, pods: list[KubeObject], state: ClusterState) -> ClusterRow:
    pod = pods[0]
    namespace = PodRef.of(pod).namespace
    return ClusterRow(
        key, key.partition("/")[0], namespace, job_name(pod), state, tick.now, tick.now
    )


def _wait(
    tick: Situation, pods: Sequence[KubeObject], reason: PodReason, message: str
) -> list[Action]:
    """Keep the pods Pending with `reason`, or fail them once they waited too long."""
    actions: list[Action] = []
    for pod in pods:
        if waited_too_long(tick, pod):
            actions += gang_end.fail(tick, [pod], gave_up(tick, message), reason)
            continue
        status = pod_status.pod_status(
            pod, None, exit_code=None, now=tick.now, reason=reason, message=message, pending=True
        )
        if _shown(status) == _shown(pod.get("status") or {}):
            continue
        ref = PodRef.of(pod)
        actions += [PatchStatus(ref, status, None), Event(ref, reason, message, warning=True)]
    return actions
