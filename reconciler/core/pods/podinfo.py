"""Reading the few facts the planner needs out of a pod's JSON."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.domain import KubeObject

FINISHED_PHASES = ("Succeeded", "Failed")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CLUSTER_ANNOTATION = "runpod.io/cluster"
POD_ID_ANNOTATION = "runpod.io/pod-id"
MOUNTING_KEYS = ("containers", "initContainers", "ephemeralContainers")


def kept(pod: KubeObject) -> KubeObject:
    """A listed pod as the reconciler keeps it, changed in place: without its
    managedFields and its ServiceAccount token volumes (`kube-api-access-xxxxx`,
    projected volumes with a serviceAccountToken source) and their mounts. Nothing reads
    them, and they are most of a pod's memory: the token volume is a third of a plain
    pod's, managedFields often more than the rest of a pod. A list left empty loses its
    key, as the API server leaves out an empty one.

    Loops, no call per entry: this runs per pod, per tick."""
    metadata = pod["metadata"]
    if "managedFields" in metadata:
        del metadata["managedFields"]
    spec = pod.get("spec")
    if not spec or not spec.get("volumes"):
        return pod
    tokens: set[str] = set()
    for volume in spec["volumes"]:
        if "projected" in volume and _is_token_volume(volume["projected"]):
            tokens |= {volume["name"]}
    if not tokens:
        return pod
    _drop_named(spec, "volumes", tokens)
    for key in MOUNTING_KEYS:
        if key in spec:
            for container in spec[key] or ():
                if "volumeMounts" in container:
                    _drop_named(container, "volumeMounts", tokens)
    return pod


def _is_token_volume(projected: KubeObject) -> bool:
    # A loop, not any(): a generator costs calls, and this runs per pod.
    for source in projected.get("sources") or ():  # noqa: SIM110
        if "serviceAccountToken" in source:
            return True
    return False


def _drop_named(holder: KubeObject, key: str, names: set[str]) -> None:
    others: list[KubeObject] = []
    for entry in holder[key] or ():
        if not ("name" in entry and entry["name"] in names):
            others += (entry,)
    if others:
        holder[key] = others
    else:
        del holder[key]


def uid(pod: KubeObject) -> str:
    # No str(): the API server's UID is a string, and this runs ten times a pod a tick.
    uid: str = pod["metadata"]["uid"]
    return uid


def phase(pod: KubeObject) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_deleting(pod: KubeObject) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def deletion_is_immediate(pod: KubeObject) -> bool:
    """Deleted with grace 0: nothing is left for a kubelet to do but wait for finalizers."""
    return pod["metadata"].get("deletionGracePeriodSeconds") == 0


def is_finished(pod: KubeObject) -> bool:
    return phase(pod) in FINISHED_PHASES


class Role(enum.Enum):
    """Who runs a pod bound to the virtual node."""

    ALONE = "alone"
    """Ours, on an instance of its own."""
    GANG = "gang"
    """Ours, as a member of an Instant Cluster (`core.plan.gangs`)."""
    DAEMON_SET = "daemon-set"
    """Nobody: DaemonSet pods land on every node."""
    MIRROR = "mirror"
    """Nobody: a static pod's mirror belongs to a real kubelet."""


def role(pod: KubeObject) -> Role:
    metadata = pod["metadata"]
    refs = metadata.get("ownerReferences")
    # Most pods have no owner: spare them the generator (this runs per pod, per tick).
    if refs and any(ref.get("kind") == "DaemonSet" for ref in refs):
        return Role.DAEMON_SET
    annotations = metadata.get("annotations")
    if not annotations:
        return Role.ALONE
    if annotations.get(CLUSTER_ANNOTATION) == "true":
        return Role.GANG
    return Role.MIRROR if MIRROR_ANNOTATION in annotations else Role.ALONE


def is_ours_to_run(pod: KubeObject) -> bool:
    """DaemonSet and mirror pods land on every node; a virtual node never runs them. A
    pod that asks for a cluster runs with its gang (`core.plan.gangs`), never alone."""
    return role(pod) is Role.ALONE


def asks_for_cluster(pod: KubeObject) -> bool:
    """An Indexed Job's pod marked to run as a member of one Instant Cluster."""
    return pod_annotations(pod).get(CLUSTER_ANNOTATION) == "true"


def is_daemon_set_pod(pod: KubeObject) -> bool:
    return role(pod) is Role.DAEMON_SET


@dataclass(frozen=True)
class NodePods:
    """A node's pods by `role`, sorted in one pass over the list."""

    alone: list[KubeObject]
    gangs: list[KubeObject]
    daemon_sets: list[KubeObject]


def sort_node_pods(pods: Iterable[KubeObject]) -> NodePods:
    sorted_pods = NodePods([], [], [])
    for pod in pods:
        match role(pod):  # compared, not hashed: an enum's hash is a Python call
            case Role.ALONE:
                sorted_pods.alone.append(pod)
            case Role.GANG:
                sorted_pods.gangs.append(pod)
            case Role.DAEMON_SET:
                sorted_pods.daemon_sets.append(pod)
    return sorted_pods


def pod_annotations(pod: KubeObject) -> Mapping[str, str]:
    """The pod's own annotations, read-only: no copy (this runs per pod, per tick)."""
    return pod["metadata"].get("annotations") or {}


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def created_at(pod: KubeObject) -> datetime | None:
    return parse_time(pod["metadata"].get("creationTimestamp"))


def deadline_passed(pod: KubeObject, now: datetime) -> bool:
    """spec.activeDeadlineSeconds, counted from status.startTime as the kubelet does."""
    limit = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if limit is None:
        return False  # most pods: spare parsing their times on every tick
    started = parse_time((pod.get("status") or {}).get("startTime")) or created_at(pod)
    if started is None:
        return False
    return now - started >= timedelta(seconds=int(limit))


def age(pod: KubeObject, now: datetime) -> timedelta:
    created = created_at(pod)
    return timedelta(0) if created is None else now - created


def oldest_first(pod: KubeObject) -> tuple[str, str, str]:
    """Sort key: creation time, then namespace and name for a stable order."""
    created = created_at(pod)
    meta = pod["metadata"]
    return (created.isoformat() if created else "", meta.get("namespace", "default"), meta["name"])
