"""How a gang ends: rank 0's result, or its deadline (docs/architecture.md §3, "Instant
Clusters"; `plan.gangs` decides the rest of a gang's life).

A single batch pod's wrapper stops its own instance, and the list shows it EXITED. A
cluster member cannot be stopped (RunPod refuses every pod route for a member), and
nothing else in the list changes when its process ends. So the reconciler asks: while
rank 0 runs, it reads rank 0's last log line for the wrapper's exit-code marker, at most
once per `--gang-result-interval` per gang (`due_reads`; the engine reads, the planner
records when). That read is the one RunPod request a steady tick with a running gang
can add: one per running gang per interval.

The gang's result is rank 0's, as Kubeflow's PyTorchJob has the master decide and
torchrun fails every node when a worker fails: 0 makes every pod Succeeded (each index
completes, so the Job does); any other code fails the whole gang, and the Job's backoff
makes it again. Past the pods' `activeDeadlineSeconds` the gang fails with
DeadlineExceeded, as a single pod does.

An end is written on the gang's pods first (their terminal status), then recorded in the
gang's cluster row (`ClusterRow.ended`) committed before the cluster's DELETE; the
DELETE is sent only once every pod's patch of this plan succeeded. So a crash after the
DELETE, even with the database lost, finds the end on the pods (finished pods never run
again), and a patch that failed keeps the cluster until a later tick writes the end
(from the row, `settle_recorded`, or from rank 0's log read again once the row is lost).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from reconciler.core.actions import (
    Action,
    DeleteCluster,
    Event,
    FinalizePod,
    PatchStatus,
    PodRef,
    SaveClusterRow,
)
from reconciler.core.contract import STOP_ON_EXIT_ENV
from reconciler.core.domain import Instance, InstanceStatus, KubeObject
from reconciler.core.plan.situation import Situation
from reconciler.core.pods import podinfo
from reconciler.core.reasons import Notice, PodReason, TerminateReason
from reconciler.core.resources.clusters import (
    CLUSTER_ID,
    ClusterRow,
    ClusterState,
    gang_key,
    index_of,
    job_name,
    job_uid,
    key_job,
)
from reconciler.core.translate import status as pod_status
from reconciler.core.translate.annotations import POD_ID

ENDED = (InstanceStatus.EXITED, InstanceStatus.ERROR, InstanceStatus.TERMINATED)
"""A member in one of these (not by our DELETE) fails its gang."""
LAST_READ_TRIES = 5
"""A gang about to end waits for rank 0's one last read at most this many times when it
fails (one read per tick): a success is never lost to a few failed reads, and a log
route that never answers cannot keep a cluster billing."""
DELETE_PAUSE_SECONDS = 60
"""A DELETE RunPod answered lately is not asked again while the list still shows the
members, for at most this long and no longer than the list is said to lag
(--create-grace-time); one decided but never answered (a crash, an error) is asked
again at once."""


def due_reads(
    members: Mapping[str, Sequence[Instance]],
    rows: Mapping[str, ClusterRow],
    live: Mapping[str, Sequence[KubeObject]],
    interval: float,
    now: datetime,
) -> dict[str, tuple[str, str]]:
    """By gang key: rank 0's member id and its marker's nonce, for each live gang (its
    pods by key) whose rank 0 runs a batch process and was not read within `interval`
    (0: none), or that is about to end (one last read, so that a gang that ended just
    before is not failed: its deadline passed, its pods changed, a member failed or
    vanished; whatever rank 0's own state, unless its failed last reads used up
    LAST_READ_TRIES). A lost row reads at once: one extra read, never a missed result."""
    due: dict[str, tuple[str, str]] = {}
    if interval <= 0:
        return due
    # A gang whose Job still has live pods but not all of its own (a member ended or
    # went) is about to fail: one last read, so that a gang that ended just before is
    # not failed and run again.
    live_jobs = {key_job(gang) for gang in live}
    for gang, listed in members.items():
        row = rows.get(gang)
        if row is not None and row.state is ClusterState.DELETING:
            continue
        if gang not in live and key_job(gang) not in live_jobs:
            continue
        if row is not None and row.unread_ends >= LAST_READ_TRIES:
            continue  # judged on what is known
        mine = [m for m in listed if row is None or m.cluster_id in (row.cluster_id, None)]
        broken = bool(member_ended(mine or listed, row))
        checked = row.result_checked_at if row is not None else None
        late = broken or gang not in live
        late = late or any(podinfo.deadline_passed(pod, now) for pod in live[gang])
        if checked is not None and (now - checked).total_seconds() < interval and not late:
            continue
        primary = next((m for m in mine or listed if m.rank == 0), None)
        nonce = primary.env.get(STOP_ON_EXIT_ENV) if primary is not None else None
        if primary is None or not nonce or primary.status is InstanceStatus.TERMINATED:
            continue
        if primary.status is not InstanceStatus.RUNNING and not broken:
            continue
        due[gang] = (primary.id, nonce)
    return due


def member_ended(members: Sequence[Instance], row: ClusterRow | None) -> str | None:
    """What ends the gang on its cluster's side, or None: a member that ended (not by
    our DELETE), or one the cluster had that RunPod no longer lists."""
    failed = [m for m in members if m.status in ENDED]
    if failed:
        cluster_id = failed[0].cluster_id
        return f"member {failed[0].id} of cluster {cluster_id} is {failed[0].status.value}"
    if row is None or row.state is not ClusterState.RUNNING or not members:
        return None
    ranks = {m.rank for m in members}
    if None in ranks or len(members) >= row.pod_count:
        return None  # ranks are assigned while the cluster provisions
    gone = sorted(set(range(row.pod_count)) - {r for r in ranks if r is not None})
    return f"the member of rank {gone[0]} of cluster {members[0].cluster_id} is gone"


def read_failed(tick: Situation, key: str, row: ClusterRow) -> list[Action] | None:
    """The gang is about to end and rank 0's one last read failed (a 5xx, a 429): that
    says nothing of its end, so it waits for the read of a later tick, counted in its
    row, up to LAST_READ_TRIES; then (None) it is judged on what is known, so a log
    route that never answers cannot keep a cluster billing."""
    if key not in tick.obs.gang_unread or row.unread_ends >= LAST_READ_TRIES:
        return None
    counted = row.changed(unread_ends=row.unread_ends + 1, result_checked_at=tick.now)
    return [SaveClusterRow(counted)]


def unjudged(
    tick: Situation,
    key: str,
    members: Mapping[str, Sequence[Instance]],
    rows: Mapping[str, ClusterRow],
    pods: Sequence[KubeObject],
) -> tuple[set[str | None], list[Action]]:
    """The earlier clusters of the Job (its gang is `key` now) whose one last read of
    rank 0 failed: their gang is neither failed nor deleted on an unknown end this tick,
    and the read goes again next tick (`read_failed`'s bound); with the row saves that
    count the failed reads."""
    held: set[str | None] = set()
    actions: list[Action] = []
    for gang, listed in members.items():
        cluster_id = listed[0].cluster_id
        if gang == key or gang not in tick.obs.gang_unread or not pods:
            continue
        row = rows.get(gang) or _row_of(tick, gang, cluster_id, pods[0])
        counted = read_failed(tick, gang, row)
        if counted is not None:
            held.add(cluster_id)
            actions += counted
    return held, actions


def _row_of(tick: Situation, gang: str, cluster_id: str | None, pod: KubeObject) -> ClusterRow:
    """A row for a running cluster the database does not know (lost, or another's)."""
    ref = PodRef.of(pod)
    return ClusterRow(
        gang, key_job(gang), ref.namespace, job_name(pod), ClusterState.RUNNING, tick.now, tick.now
    ).changed(cluster_id=cluster_id)


def result(row: ClusterRow, code: int, now: datetime) -> ClusterRow:
    """The row with rank 0's `code` as the gang's end, to be saved with its DELETE."""
    return row.changed(exit_code=code, result_checked_at=now, reason=None, message=None)


def failure(row: ClusterRow, reason: PodReason, message: str) -> ClusterRow:
    """The row with the gang's failure as its end, to be saved with its DELETE."""
    return row.changed(reason=reason, message=message)


def deadline_passed(tick: Situation, pods: Sequence[KubeObject]) -> str | None:
    """Why the gang is past its deadline (one pod's is enough: none runs alone), or None."""
    for pod in pods:
        if podinfo.deadline_passed(pod, tick.now):
            name = PodRef.of(pod).name
            return f"pod {name} passed its spec.activeDeadlineSeconds: the gang fails"
    return None


def delete(
    tick: Situation,
    cluster_id: str | None,
    row: ClusterRow | None,
    detail: str,
    pods: Sequence[KubeObject],
    reason: TerminateReason = TerminateReason.POD_FAILED,
    members: Sequence[Instance] = (),
) -> list[Action]:
    """DELETE the cluster, its row (with the gang's end, if one is recorded in it) saved
    as deleting first; not within the pause after RunPod answered an earlier one. The
    caller plans `pods`' end before this: the DELETE waits while one of those patches
    failed (the executor checks), as an instance waits for its pod's end. Each of
    `pods` that stays has its member's (of `members`, by rank) last lines kept first."""
    if cluster_id is None:
        return []
    pause = min(DELETE_PAUSE_SECONDS, tick.settings.timing.create_grace_time)
    if row is not None and tick.within(row.delete_answered_at, pause):
        return []
    deleting = row.changed(state=ClusterState.DELETING, updated_at=tick.now) if row else None
    refs = tuple(PodRef.of(p) for p in pods)
    logs = _logs_kept(pods, members)
    return [DeleteCluster(cluster_id, reason, detail, deleting, refs, logs)]


def _logs_kept(
    pods: Sequence[KubeObject], members: Sequence[Instance]
) -> tuple[tuple[PodRef, str, str], ...]:
    """Each pod that stays (not being deleted), with the member of its index's rank and
    its Job (whose gang's nonce marks the wrapper's lines)."""
    by_rank = {m.rank: m.id for m in members if m.rank is not None}
    return tuple(
        (PodRef.of(pod), by_rank[index], job)
        for pod in pods
        if not podinfo.is_deleting(pod)
        and (index := index_of(pod)) in by_rank
        and (job := job_uid(pod)) is not None
    )


def fail(
    tick: Situation,
    pods: Sequence[KubeObject],
    message: str,
    reason: PodReason = PodReason.CLUSTER_MEMBER_FAILED,
) -> list[Action]:
    """The pods fail with `reason` (their gang did), each with an Event."""
    actions: list[Action] = []
    for pod in pods:
        if podinfo.is_finished(pod):
            continue
        ref = PodRef.of(pod)
        status = pod_status.pod_status(
            pod, None, exit_code=None, now=tick.now, reason=reason, message=message
        )
        actions += [PatchStatus(ref, status, None), Event(ref, reason, message, warning=True)]
    return actions


def settle_recorded(
    tick: Situation,
    job: str,
    active: list[KubeObject],
    rows: Mapping[str, ClusterRow],
    listed: set[str | None],
) -> tuple[list[Action], list[KubeObject]]:
    """Live pods whose gang's end was recorded (a crash or a failed patch came between
    the record and the pods' status) get that end: a pod of the cluster its annotation
    names, or one not annotated yet whose gang is this one. The DELETE goes again while
    the cluster is listed and no answer to it is recent. Also returns the pods left."""
    ended = {
        r.cluster_id: r
        for r in rows.values()
        if r.ended and r.cluster_id is not None and key_job(r.gang) == job
    }
    own = rows.get(gang_key(job, active))
    settled: dict[str, tuple[ClusterRow, list[KubeObject]]] = {}
    for pod in active:
        cluster_id = podinfo.pod_annotations(pod).get(CLUSTER_ID)
        row = ended.get(cluster_id) if cluster_id is not None else own
        if row is not None and row.ended:
            settled.setdefault(row.gang, (row, []))[1].append(pod)
    actions: list[Action] = []
    for row, group in settled.values():
        actions += settle(tick, group, row)
        if row.cluster_id in listed:
            why = TerminateReason.PROCESS_ENDED if row.exit_code is not None else None
            reason = why or TerminateReason.POD_FAILED
            actions += delete(tick, row.cluster_id, row, "its gang ended", group, reason)
    left = {id(p) for _, group in settled.values() for p in group}
    return actions, [p for p in active if id(p) not in left]


def succeeded_before(
    key: str, rows: Mapping[str, ClusterRow], ended: Mapping[str | None, tuple[str, int]]
) -> str | None:
    """How the Job's gang is known to have succeeded before its gang `key` (pods the Job
    made since, with no cluster yet): rank 0 of an earlier gang's cluster exited 0, as
    read this tick (`ended`: by cluster id, its gang and code) or recorded in its row.
    None when nothing says so."""
    for cluster_id, (_, code) in ended.items():
        if code == 0:
            return f"rank 0 of cluster {cluster_id} exited with 0"
    for gang, row in rows.items():
        if gang != key and row.exit_code == 0:
            return f"rank 0 of cluster {row.cluster_id} exited with 0"
    return None


def done_before(tick: Situation, pods: Sequence[KubeObject], why: str) -> list[Action]:
    """Pods the Job made after its gang succeeded (`why`) end Succeeded too, so that the
    Job completes and its work never runs again. The Job controller replaces a pod
    deleted after rank 0 exited 0 at once (a deleted pod that did not succeed counts as
    failed), before its gang's end is read or written; such pods must not form a gang."""
    message = f"{why}: the gang succeeded, and this pod ends with it"
    actions: list[Action] = []
    for pod in pods:
        ref = PodRef.of(pod)
        status = pod_status.pod_status(pod, None, exit_code=0, now=tick.now, message=message)
        actions += [PatchStatus(ref, status, None), Event(ref, Notice.COMPLETED, message)]
    return actions


def finalize(tick: Situation, deleting: list[KubeObject], listed: set[str | None]) -> list[Action]:
    """Finish deleted pods like a kubelet, each once its cluster is gone from the list."""
    actions: list[Action] = []
    for pod in deleting:
        shown = podinfo.pod_annotations(pod)
        if shown.get(CLUSTER_ID) in listed:
            continue
        final = pod_status.deleted_status(pod, shown.get(POD_ID), exit_code=None, now=tick.now)
        actions.append(FinalizePod(PodRef.of(pod), None, final))
    return actions


def settle(tick: Situation, pods: Sequence[KubeObject], row: ClusterRow) -> list[Action]:
    """Each pod's terminal status from the gang's recorded end, as a kubelet shows one:
    rank 0's exit code on rank 0 (Succeeded with 0, else Failed with it), the gang's
    success (exit 0) or its failure's reason on the others."""
    actions: list[Action] = []
    for pod in pods:
        if podinfo.is_finished(pod):
            continue
        ref = PodRef.of(pod)
        code, reason, message = _end_of(pod, row)
        status = pod_status.pod_status(
            pod, None, exit_code=code, now=tick.now, reason=reason, message=message
        )
        if reason is None:
            text = message or ""
            event = Event(ref, Notice.COMPLETED, text, warning=code != 0)
        else:
            event = Event(ref, reason, message or reason.value, warning=True)
        actions += [PatchStatus(ref, status, None), event]
    return actions


def _end_of(pod: KubeObject, row: ClusterRow) -> tuple[int | None, PodReason | None, str | None]:
    """The pod's exit code, reason and message from its gang's end."""
    cluster = f"cluster {row.cluster_id}"
    if row.exit_code == 0:
        return 0, None, f"rank 0 of {cluster} exited with 0: the gang succeeded"
    if row.exit_code is not None and index_of(pod) == 0:
        return row.exit_code, None, f"rank 0 of {cluster} exited with {row.exit_code}"
    if row.exit_code is not None:
        message = f"rank 0 of {cluster} exited with {row.exit_code}: the gang fails"
        return None, PodReason.CLUSTER_MEMBER_FAILED, message
    return None, row.reason or PodReason.CLUSTER_MEMBER_FAILED, row.message
