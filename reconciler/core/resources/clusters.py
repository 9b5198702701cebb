"""Which pods run as one RunPod Instant Cluster, and how a cluster is known as ours
(docs/architecture.md §3, "Cloud resources").

An Indexed Job whose pod template carries `runpod.io/cluster: "true"` asks for a gang:
all its `completions` pods (2 to 250, `parallelism` equal to `completions`, identical
but for their index) run together as the members of one cluster, index i on the
member RunPod gives rank i.

A gang is one attempt of such a Job: the Job's pods that are alive now. When a member
fails the whole gang is failed, the Job controller makes new pods, and they are a new
gang: the gang's key (the Job's UID and a digest of its pods' UIDs) changes with them.
The key is the cluster's mark: its members' shared env carries our owner tag and
`GANG_ENV=<key>` (a cluster has one env for all members, so no pod UID tag), so a
create whose answer was lost is found by its tags, and a cluster whose key no living
gang has is collected.

The store's row of a gang's cluster is `core.cluster_row`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TypeVar

from reconciler.core.actions import DeleteCluster, PodRef
from reconciler.core.capacity.refusals import GANG_REFUSALS, GangRefusal
from reconciler.core.cluster_row import ClusterRow, ClusterState
from reconciler.core.contract import GANG_ENV, POD_UID_ENV, STOP_ON_EXIT_ENV, exit_nonce
from reconciler.core.domain import (
    Cloud,
    ClusterRequest,
    CreateRequest,
    GpuType,
    Instance,
    KubeObject,
)
from reconciler.core.pods import podinfo
from reconciler.core.printable import quoted
from reconciler.core.reasons import PodReason
from reconciler.core.resources import cluster_age
from reconciler.core.translate.container import choose_container, start_command, wrap_for_batch
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.request import requests_out_of_stock

CLUSTER = podinfo.CLUSTER_ANNOTATION
"""On a pod template: run the Indexed Job's pods as one Instant Cluster."""
RANK = "runpod.io/rank"
"""Written on each gang pod: its member's rank (NODE_RANK), equal to its index."""
CLUSTER_ID = "runpod.io/cluster-id"
"""Written on each gang pod: the Instant Cluster its member belongs to."""
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""The Job controller's annotation with an Indexed Job pod's index."""
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
"""What the Job controller adds to each container; members share one env, so it is
left out of the cluster's env (RunPod's NODE_RANK says the same per member)."""
MIN_PODS, MAX_PODS = 2, 250


def job_uid(pod: KubeObject) -> str | None:
    """The UID of the Job that controls the pod, if one does."""
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller") and ref.get("uid"):
            return str(ref["uid"])
    return None


GangJob = tuple[str, str]
"""A gang's Job as (namespace, UID): a pod's ownerReference is anyone's to write who may
make the pod, so a Job UID alone says nothing of which namespace's Job it is."""


def job_of(pod: KubeObject) -> GangJob | None:
    """The (namespace, UID) of the Job the pod's controller ownerReference names."""
    uid = job_uid(pod)
    return None if uid is None else (str(pod["metadata"].get("namespace") or "default"), uid)


def jobs_recorded(rows: Iterable[ClusterRow]) -> set[GangJob]:
    """The Jobs our cluster rows record: each was read in its namespace, with its UID,
    before its gang's first create (only pods of such a Job form a gang), so a row is
    proof enough."""
    return {(row.namespace, row.job_uid) for row in rows}


def job_refusal(job: GangJob) -> str:
    namespace, uid = job
    return (
        f"its controller ownerReference names Job UID {quoted(uid)}, which is no Job of "
        f"namespace {namespace}: the pod joins no gang"
    )


def job_name(pod: KubeObject) -> str:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller"):
            return str(ref.get("name") or "")
    return ""


def index_of(pod: KubeObject) -> int | None:
    text = podinfo.pod_annotations(pod).get(COMPLETION_INDEX, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None


def completed_indexes(job: KubeObject) -> frozenset[int]:
    """The indexes an Indexed Job counts as completed: its controller's
    `status.completedIndexes`, intervals as in "1,3-5,7" (a part that is not one is
    skipped; none past a gang's largest size is kept)."""
    text = str((job.get("status") or {}).get("completedIndexes") or "")
    found: set[int] = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            found.update(range(int(first), min(int(last or first), MAX_PODS) + 1))
    return frozenset(found)


def is_live(pod: KubeObject) -> bool:
    """Neither finished nor being deleted: a pod of the gang's current attempt."""
    return not podinfo.is_finished(pod) and not podinfo.is_deleting(pod)


def live_gangs(pods: Iterable[KubeObject]) -> dict[str, list[KubeObject]]:
    """The gangs these pods (of any Jobs) are now, by key, with their live pods: one per
    namespace and Job UID."""
    by_job: dict[GangJob, list[KubeObject]] = {}
    for pod in pods:
        job = job_of(pod)
        if job is not None and is_live(pod):
            by_job.setdefault(job, []).append(pod)
    return {gang_key(job[1], live): live for job, live in by_job.items()}


def gang_key(job: str, pods: Iterable[KubeObject]) -> str:
    """The mark of one attempt of the Job's gang: the Job's UID and its pods' UIDs."""
    uids = "\n".join(sorted(podinfo.uid(pod) for pod in pods))
    return f"{job}/{hashlib.sha256(uids.encode()).hexdigest()[:12]}"


def key_job(key: str) -> str:
    """The Job UID a gang key names."""
    return key.partition("/")[0]


_V = TypeVar("_V")


def by_job(by_gang: Mapping[str, _V]) -> dict[str, dict[str, _V]]:
    """What is kept by gang key, grouped by the key's Job UID: each gang then looks up
    its own Job's members and rows instead of searching all, so that a tick's work grows
    with the gangs, not with their square."""
    found: dict[str, dict[str, _V]] = {}
    for gang, value in by_gang.items():
        found.setdefault(key_job(gang), {})[gang] = value
    return found


def members_by_gang(
    instances: Iterable[Instance], owner_id: str
) -> Mapping[str, Sequence[Instance]]:
    """Our cluster members by gang key; another owner's, or untagged, never."""
    found: dict[str, list[Instance]] = {}
    for instance in instances:
        gang = instance.env.get(GANG_ENV)
        if instance.cluster_id is not None and instance.owner == owner_id and gang:
            found.setdefault(gang, []).append(instance)
    return found


def members_by_pod(
    gang_pods: Iterable[KubeObject], members: Iterable[Instance], owner_id: str
) -> dict[str, list[Instance]]:
    """Each live gang pod's member, by pod UID: of the cluster RunPod lists with our
    owner tag and that gang's tag (whose digest names the pod's UID with its gang's),
    the member whose rank is the pod's index. What exec, `kubectl top` and the GPU gauge
    reach a member pod by, as they reach a single pod's instance; no annotation is read
    but the Job controller's index."""
    ours = members_by_gang(members, owner_id)
    found: dict[str, list[Instance]] = {}
    for gang, pods in live_gangs(gang_pods).items():
        by_rank: dict[int | None, Instance] = {m.rank: m for m in ours.get(gang, ())}
        for pod in pods:
            member = by_rank.get(index_of(pod))
            if member is not None and member.rank is not None:
                found[podinfo.uid(pod)] = [member]
    return found


def member_for(
    pod: KubeObject, row: ClusterRow, listed: Iterable[Instance], owner_id: str | None
) -> Instance | None:
    """The member of the row's cluster (as RunPod lists it, read by the row's id) that
    runs the pod: our owner tag (None: any owner), the row's gang tag, the pod's Job and
    namespace, its index as rank. None when RunPod's record does not say so."""
    if row.job_uid != job_uid(pod) or row.namespace != PodRef.of(pod).namespace:
        return None
    index = index_of(pod)
    for member in listed:
        ours = owner_id is None or member.owner == owner_id
        tagged = member.env.get(GANG_ENV) == row.gang and member.cluster_id == row.cluster_id
        if ours and tagged and index is not None and member.rank == index:
            return member
    return None


def gang_nonce(job: str) -> str:
    """The batch wrapper's exit-code nonce of a Job's gang: its members share one env,
    and every reader of a member's log knows the Job from the pod."""
    return exit_nonce(f"gang {job}")


def member_of(pod: KubeObject) -> tuple[str, str] | None:
    """The id of the cluster member a gang's pod mirrors, and its log's exit-code nonce;
    None for a pod no member runs (yet). The id is the pod's annotation, anyone's to
    write who may edit the pod: check it with `runs_gang` before reading anything."""
    shown = podinfo.pod_annotations(pod)
    member, job = shown.get(podinfo.POD_ID_ANNOTATION), job_uid(pod)
    if shown.get(CLUSTER_ID) is None or member is None or job is None:
        return None
    return member, gang_nonce(job)


def runs_gang(instance: Instance, pod: KubeObject) -> bool:
    """Whether RunPod's record makes the instance a member of the pod's Job's cluster:
    our gang tag, naming that Job, in a cluster's member."""
    gang, job = instance.env.get(GANG_ENV), job_uid(pod)
    return instance.cluster_id is not None and gang is not None and key_job(gang) == job


@dataclass(frozen=True)
class UnrunCluster:
    """A listed cluster of ours (our owner tag in its members' env) that no gang of a
    Job with a live pod on the node runs: collected by the gangs' planning after the
    orphan grace, or, without our gang tag, never (nothing of ours can tell its Job)."""

    cluster_id: str
    members: int
    cost_per_hr: float
    gang: str | None
    born: datetime | None = None
    """When RunPod made it (its members' earliest `createdAt`): the leak audit's grace
    runs from RunPod's record, not from a sighting kept in a process's memory, so a
    `sync --once` CronJob reports as the loop does."""

    def unrun_for(self, now: datetime) -> float:
        """Seconds since it was made; with no record of that, as long as can be told."""
        return (now - self.born).total_seconds() if self.born is not None else float("inf")


def unrun(
    members: Iterable[Instance],
    gang_pods: Iterable[KubeObject],
    owner_id: str,
    unread: Iterable[str] = (),
    first_listed: Mapping[str, datetime] | None = None,
) -> list[UnrunCluster]:
    """Clusters of ours that no Job with a live pod on the node runs (the leak audit
    reports those that stay so past the orphan grace); `unread`: Job UIDs whose pods
    could not be told theirs this tick (nothing is said of their clusters);
    `first_listed`: when a list first showed those of unknown age (`cluster_age`)."""
    live = {
        job_uid(pod)
        for pod in gang_pods
        if not podinfo.is_finished(pod) and not podinfo.is_deleting(pod)
    } | set(unread)
    by_cluster: dict[str, list[Instance]] = {}
    for member in members:
        if member.cluster_id is not None and member.owner == owner_id:
            by_cluster.setdefault(member.cluster_id, []).append(member)
    found = []
    for cluster_id, listed in sorted(by_cluster.items()):
        gang = listed[0].env.get(GANG_ENV) or None
        if gang is not None and key_job(gang) in live:
            continue
        cost = round(sum(m.cost_per_hr for m in listed), 6)
        born = cluster_age.made(listed) or (first_listed or {}).get(cluster_id)
        found.append(UnrunCluster(cluster_id, len(listed), cost, gang, born))
    return found


def leaked(
    unrun_clusters: Iterable[UnrunCluster],
    grace_seconds: float,
    now: datetime,
    deleting: Iterable[str | None] = (),
) -> list[UnrunCluster]:
    """The unrun clusters made longer than the orphan grace ago that we are not deleting
    (`deleting`: a DELETE planned this tick or recorded in a row): leaks. The gangs'
    planning deletes a tagged one once its Job has no pod on the node, so what stays is
    one without our gang tag, which nothing of ours can tell the Job of. A DELETE that
    keeps failing is not a leak: its step says so once."""
    ours = set(deleting)
    return [
        c for c in unrun_clusters if c.unrun_for(now) >= grace_seconds and c.cluster_id not in ours
    ]


def deleting(rows: Iterable[ClusterRow], planned: Iterable[object]) -> set[str | None]:
    """The clusters we are deleting on purpose: a `DeleteCluster` among the tick's
    actions, or a row whose DELETE was decided."""
    found = {a.cluster_id for a in planned if isinstance(a, DeleteCluster)}
    ended = (ClusterState.DELETING, ClusterState.GONE)
    return found | {r.cluster_id for r in rows if r.state in ended}


def unlisted(
    rows: Iterable[ClusterRow],
    gang_pods: Iterable[KubeObject],
    listed: Iterable[Instance],
    owner_id: str,
) -> list[str]:
    """The clusters to read by id (their members), since one list is no proof: those a
    live gang's running row records that the list shows no member of as that gang's
    (our owner tag and the row's gang tag), and those its pods' annotation names that the
    list shows no member of, and those we are deleting that the list shows no member of
    (a deleted one then leaves `state show` and the caps at once, `gone_rows`). Only
    RunPod's 404 says a cluster is gone, and only its record
    by id that its tags changed. What a pod's annotation names is only where to look: the
    members count as ours by their tags (`members_by_gang`)."""
    shown: set[str | None] = set()
    tagged: set[tuple[str | None, str | None]] = set()
    for member in listed:
        shown.add(member.cluster_id)
        if member.owner == owner_id:
            tagged.add((member.cluster_id, member.env.get(GANG_ENV)))
    live = live_gangs(gang_pods)
    wanted = {
        row.cluster_id
        for row in rows
        if row.cluster_id
        and (
            (
                row.state is ClusterState.RUNNING
                and row.gang in live
                and (row.cluster_id, row.gang) not in tagged
            )
            or (row.state is ClusterState.DELETING and row.cluster_id not in shown)
        )
    }
    wanted |= {
        cluster_id
        for pods in live.values()
        for pod in pods
        if (cluster_id := podinfo.pod_annotations(pod).get(CLUSTER_ID)) and cluster_id not in shown
    }
    return sorted(wanted)


def gone_rows(
    rows: Iterable[ClusterRow], gone: frozenset[str], staying: Collection[str]
) -> tuple[list[str], list[ClusterRow]]:
    """Rows of clusters we deleted that RunPod answered 404 for by id (`gone`), or that
    are `gone` already: forgotten (by gang key) when no pod of their Job stays on the
    node (`staying`: the Jobs with a pod not being deleted), else kept as `gone` for the
    gang's end that their pods and the Job's next attempt read (the second list: rows
    that become `gone` now)."""
    jobs = set(staying)
    forgotten: list[str] = []
    kept: list[ClusterRow] = []
    for row in rows:
        deleted = row.state is ClusterState.DELETING and row.cluster_id in gone
        if not deleted and row.state is not ClusterState.GONE:
            continue
        if row.job_uid not in jobs:
            forgotten.append(row.gang)
        elif deleted:
            kept.append(row.changed(state=ClusterState.GONE))
    return forgotten, kept


def cluster_request(request: CreateRequest, key: str, pod: KubeObject, size: int) -> ClusterRequest:
    """One pod's create request as a cluster of `size` such pods: one env for all, with
    the gang's tag instead of the pod's, and its own exit-code nonce."""
    nonce = gang_nonce(key_job(key))
    env = {
        name: value
        for name, value in request.env.items()
        if name not in (POD_UID_ENV, COMPLETION_INDEX_ENV)
    }
    env[GANG_ENV] = key
    args = request.args
    if STOP_ON_EXIT_ENV in env:
        env[STOP_ON_EXIT_ENV] = nonce
        command = start_command(choose_container(pod), request.env)
        args = wrap_for_batch(command, nonce, member=True) if command is not None else None
    name = request.name.rsplit("-", 1)[0][:50] + f"-{key[-8:]}"
    return ClusterRequest(replace(request, name=name, args=args, env=env), size)


def why_not_clusterable(
    requests: Sequence[CreateRequest], job: str, pulls_privately: bool
) -> str | None:
    """Why an Instant Cluster cannot run what a gang's pods ask for: GPUs in Secure Cloud
    only, and no registry auth or template on the members (a network volume is mounted
    on every member, as `CreateClusterRequest.mounts` allows)."""
    first = requests[0]
    if first.cpu_flavor_id:
        return GANG_REFUSALS[GangRefusal.NOT_GPU].format(job=job)
    if first.registry_auth_id or pulls_privately:
        return GANG_REFUSALS[GangRefusal.REGISTRY].format(job=job)
    if first.template_id:
        return GANG_REFUSALS[GangRefusal.TEMPLATE].format(job=job)
    if all(r.cloud is not Cloud.SECURE for r in requests):
        return GANG_REFUSALS[GangRefusal.NOT_GPU].format(job=job)
    return None


def out_of_cluster_stock(
    requests: Sequence[CreateRequest], catalog: Sequence[GpuType], job: str
) -> tuple[PodReason, str] | None:
    """Why no cluster can be made now for what the gang asks (`catalog`: the GPU catalog
    with Instant Cluster stock, `product=CLUSTER`): no GPU type that fits has cluster
    stock where the gang may go. Its network volume, if any, pins it to the volume's data
    center, and the reason says so. None when one may be made (a POST is worth it)."""
    if not catalog or not requests or not requests_out_of_stock(requests, catalog):
        return None
    types = ", ".join(sorted({r.gpu_type_id for r in requests})[:3])
    volume = requests[0].network_volume
    if volume is not None:
        where = ", ".join(requests[0].datacenter_ids) or "its data center"
        return PodReason.NETWORK_VOLUME_UNAVAILABLE, (
            f"Job {job}'s network volume {volume.volume_id} is in {where}, where RunPod has "
            f"no Instant Cluster stock for {types} now: the gang waits (or use a claim of "
            "a class whose data center has cluster stock: `reconciler offers`)"
        )
    return PodReason.CAPACITY_UNAVAILABLE, (
        f"RunPod has no Instant Cluster stock for {types} where Job {job} may run: the "
        "gang waits for it"
    )


def gang_refusal(error: TranslationError, on_cluster_stock: bool) -> tuple[PodReason, str]:
    """What a gang's pods say when its create cannot be translated: the error's reason;
    a network volume's data center without stock is said to be without cluster stock
    when the ranking was on it."""
    if error.reason is PodReason.NETWORK_VOLUME_UNAVAILABLE and on_cluster_stock:
        return error.reason, (
            f"{error}: a gang runs as an Instant Cluster, and RunPod has no Instant Cluster "
            "stock there for what it asks (`reconciler offers` shows where it has)"
        )
    return error.reason, str(error)


def why_not_a_cluster(job: KubeObject, pods: list[KubeObject]) -> str | None:
    """Why the Job cannot be an Instant Cluster, in words; None when it can."""
    spec, name = job.get("spec") or {}, job["metadata"]["name"]
    completions, parallelism = spec.get("completions"), spec.get("parallelism", 1)
    figures = {"job": name, "completions": completions, "parallelism": parallelism}
    if spec.get("completionMode") != "Indexed":
        return GANG_REFUSALS[GangRefusal.NOT_INDEXED].format(**figures)
    if parallelism != completions:
        return GANG_REFUSALS[GangRefusal.UNEQUAL_PARALLELISM].format(**figures)
    if not isinstance(completions, int) or not MIN_PODS <= completions <= MAX_PODS:
        return GANG_REFUSALS[GangRefusal.SIZE].format(**figures)
    different = _difference(pods)
    if different is not None:
        return GANG_REFUSALS[GangRefusal.PODS_DIFFER].format(detail=different, **figures)
    return None


def _difference(pods: list[KubeObject]) -> str | None:
    """How the pods' specs differ, beyond what the Job controller makes per index and the
    API server adds per pod."""
    shapes = {podinfo.uid(pod): repr(_comparable(pod.get("spec") or {})) for pod in pods}
    if len(set(shapes.values())) <= 1:
        return None
    names = sorted(PodRef.of(p).name for p in pods)
    return f"the specs of {', '.join(names[:3])} are not the same"


def _comparable(spec: KubeObject) -> list[tuple[str, object]]:
    """The spec without the per-pod parts: the index's hostname and the node. (The
    ServiceAccount admission's token volume, whose name is random for each pod, is gone
    from listed pods: `podinfo.kept`.)"""
    kept = {k: v for k, v in spec.items() if k not in ("hostname", "nodeName")}
    return sorted(kept.items(), key=lambda item: item[0])
