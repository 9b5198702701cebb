"""Which RunPod instances are ours, beyond the env tags (docs/architecture.md §3, Money).

The env tags are the first proof of ownership, but a PATCH of an instance's env (or an
edit in RunPod's console) replaces the env whole and takes them away. Two more proofs
survive that: the instance id in a mapping row, and in a pod's `runpod.io/pod-id`
annotation. The annotation is anyone's to write who may edit the pod (and a row can be
rebuilt from it), so it names an instance only by the one rule for ids a tenant writes
(`core.tenancy`): RunPod's record of it (the tick's list, or a read by id) carries our
owner tag and that pod's UID tag; or, untagged, it bears the name we gave that pod (which
ends with the pod's UID; the row's recorded name once the pod is gone). Naming another
owner's instance, another pod's, or a cluster member, names nothing: the pod is told
why and its row is never rebuilt from it. An untagged instance named that way is still
ours (its tags get restored); one carrying another owner's tag never is. An untagged
instance that nothing names but whose name is the one we would give a pod of the node
"looks like ours": it is only reported, never touched, because a name is no proof.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from reconciler.core.contract import OWNER_ENV, POD_UID_ENV, STOP_ON_EXIT_ENV, exit_nonce
from reconciler.core.domain import Instance, InstanceStatus, KubeObject
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.pods import podinfo
from reconciler.core.tenancy import Marks, refusal
from reconciler.core.translate.container import is_batch
from reconciler.core.translate.names import instance_name

_INSTANCE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class Ownership:
    """Which listed instances are ours, worked out once per observation.

    The engine needs it while observing, the planner to decide, the tick report and the
    metrics to count; at 10 000 pods each working it out again cost tens of ms.
    """

    owner_id: str
    named: Mapping[str, str]
    """Instance id → pod UID, from the rows and the pods' annotations (`named_instances`)."""
    owned: Mapping[str, list[Instance]]
    """Our live instances by pod UID (`owned_instances`)."""
    lookalikes: Sequence[Lookalike]
    """Untagged instances nothing names, called like a pod of the node (`lookalikes`)."""
    lost_tags: Sequence[tuple[Instance, str]]
    """Named live instances whose owner tag is gone, with the naming pod's UID, in
    the list's order: ours, their tags to be put back."""
    refused: Mapping[str, str] = field(default_factory=dict)
    """Pod UID → why its runpod.io/pod-id names no instance of that pod (`core.tenancy`)."""
    unread: frozenset[str] = frozenset()
    """Pods whose runpod.io/pod-id names an id neither the list nor a read by id showed
    yet: no row is rebuilt from it and nothing is created for them until one does."""

    @classmethod
    def of(
        cls,
        owner_id: str,
        instances: Sequence[Instance],
        rows: Iterable[MappingRow],
        pods: Sequence[KubeObject],
        records: Records | None = None,
    ) -> Ownership:
        """From one observation; `pods` are the node's pods that are ours to run,
        `records` what RunPod says of the ids their annotations name (by default: the
        instances, as if nothing else were known)."""
        verdicts = _verdicts(pods, records or Records({i.id: i for i in instances}), owner_id)
        named = named_instances(rows, pods, instances, verdicts)
        untagged = [
            i for i in instances if i.owner is None and i.status is not InstanceStatus.TERMINATED
        ]
        return cls(
            owner_id,
            named,
            owned_instances(instances, owner_id, named),
            lookalikes(untagged, named, pods),
            [(i, named[i.id]) for i in untagged if i.id in named],
            {uid: v.refused for uid, v in verdicts.items() if v.refused is not None},
            frozenset(uid for uid, v in verdicts.items() if v.unread),
        )


def _verdicts(pods: Sequence[KubeObject], known: Records, owner_id: str) -> dict[str, Verdict]:
    """Pod UID → what its annotation names, for the pods whose annotation does not name
    their own live instance by its tags (the steady case, owned by those tags: nothing
    to record, and at 10 000 pods a tick it must cost no more than a look)."""
    found: dict[str, Verdict] = {}
    listed = known.instances
    for pod in pods:
        instance_id = podinfo.pod_annotations(pod).get(podinfo.POD_ID_ANNOTATION)
        if not instance_id:
            continue
        uid = podinfo.uid(pod)
        instance = listed.get(instance_id)
        if instance is not None and instance.status is not InstanceStatus.TERMINATED:
            env = instance.env
            if env.get(POD_UID_ENV) == uid and env.get(OWNER_ENV) == owner_id:
                continue
        found[uid] = annotation_verdict(pod, known, owner_id)
    return found


@dataclass(frozen=True)
class Records:
    """What RunPod's records (the tick's list, reads by id) say of the ids pods name."""

    instances: Mapping[str, Instance]
    """Instances by id, cluster members not among them."""
    members: Collection[str] = frozenset()
    """Ids of cluster members, anyone's: never a single pod's instance."""
    gone: Collection[str] = frozenset()
    """Ids RunPod answered 404 for: gone, proven (a past of the pod naming one)."""


class Verdict(NamedTuple):
    """What a pod's runpod.io/pod-id names, by the one rule (`core.tenancy`). A tuple:
    one is made per pod per tick."""

    named: str | None = None
    refused: str | None = None
    unread: bool = False


_NOTHING = Verdict()


def annotation_verdict(pod: KubeObject, known: Records, owner_id: str) -> Verdict:
    """Whether the pod's runpod.io/pod-id names an instance of that pod. An id RunPod
    could not have given names nothing (and is no refusal: a row could not hold it)."""
    instance_id = podinfo.pod_annotations(pod).get(podinfo.POD_ID_ANNOTATION)
    if not instance_id:
        return _NOTHING
    instance = known.instances.get(instance_id)
    uid = podinfo.uid(pod)
    if instance is not None:
        env = instance.env
        if env.get(OWNER_ENV) == owner_id and env.get(POD_UID_ENV) == uid:
            return Verdict(instance_id)  # the usual case: its own instance, by its tags
        if instance.owner is None and instance.name == instance_name(pod):
            return Verdict(instance_id)  # ours, its tags lost: they are put back
        marks = Marks(instance.owner == owner_id, instance.pod_uid)
        return Verdict(refused=refusal("instance", instance_id, marks, {uid}))
    if not _INSTANCE_ID.fullmatch(instance_id):
        return _NOTHING
    if instance_id in known.members:
        return Verdict(refused=f"{instance_id!r} is an Instant Cluster's member, no pod's")
    return Verdict(instance_id) if instance_id in known.gone else Verdict(unread=True)


def unlisted_annotations(
    pods: Iterable[KubeObject], rows: Iterable[MappingRow], listed: Collection[str]
) -> list[str]:
    """The ids the runpod.io/pod-id of pods that may have their row rebuilt name
    (live, no row or one before an instance) that the list does not show: each is read
    by id before the one rule can say whose it is (`annotation_verdict`)."""
    settled = {
        row.pod_uid
        for row in rows
        if row.state not in (MappingState.PENDING, MappingState.CREATING)
    }
    found = set()
    for pod in pods:
        if podinfo.uid(pod) in settled or podinfo.is_deleting(pod) or podinfo.is_finished(pod):
            continue
        instance_id = podinfo.pod_annotations(pod).get(podinfo.POD_ID_ANNOTATION)
        if instance_id and _INSTANCE_ID.fullmatch(instance_id) and instance_id not in listed:
            found.add(instance_id)
    return sorted(found)


def named_instances(
    rows: Iterable[MappingRow],
    pods: Iterable[KubeObject],
    instances: Iterable[Instance],
    verdicts: Mapping[str, Verdict] | None = None,
) -> dict[str, str]:
    """Instance id → pod UID, from the rows' instance ids and the pods' annotations
    (those the one rule lets name an instance: `verdicts`); an untagged instance only
    when it bears the name we gave that pod."""
    by_uid = {podinfo.uid(pod): pod for pod in pods}
    untagged = {i.id: i.name for i in instances if i.owner is None}

    def named_ours(instance_id: str, pod_uid: str, recorded: str | None) -> bool:
        if instance_id not in untagged:
            return True  # tagged (the tag decides) or not listed (nothing to act on)
        pod = by_uid.get(pod_uid)
        expected = instance_name(pod) if pod is not None else recorded
        return untagged[instance_id] == expected

    named = {
        row.instance_id: row.pod_uid
        for row in rows
        if row.instance_id and named_ours(row.instance_id, row.pod_uid, row.instance_name)
    }
    for uid, verdict in (verdicts or {}).items():
        if verdict.named is not None and named_ours(verdict.named, uid, None):
            named.setdefault(verdict.named, uid)
    return named


def annotated_instance(owners: Ownership, pod: KubeObject) -> str | None:
    """The instance id the pod's runpod.io/pod-id names, if a row may be rebuilt from it:
    an id RunPod could have given (and a row can store), of this pod by the one rule,
    named by this pod alone (two pods naming one id would break the rows' uniqueness,
    and fail every commit)."""
    instance_id = podinfo.pod_annotations(pod).get(podinfo.POD_ID_ANNOTATION)
    if not instance_id or not _INSTANCE_ID.fullmatch(instance_id):
        return None
    return instance_id if owners.named.get(instance_id) == podinfo.uid(pod) else None


def owned_instances(
    instances: Iterable[Instance], owner_id: str, named: Mapping[str, str] | None = None
) -> dict[str, list[Instance]]:
    """Our instances by pod UID: tagged as ours, or untagged and named by a row or a
    pod's annotation. Anything else is not ours to see."""
    owned: dict[str, list[Instance]] = defaultdict(list)
    for instance in instances:
        if instance.status is InstanceStatus.TERMINATED:
            continue
        owner = instance.owner
        if owner == owner_id:
            owned[instance.pod_uid or f"untagged:{instance.id}"].append(instance)
        elif owner is None and (uid := (named or {}).get(instance.id)) is not None:
            owned[uid].append(instance)  # named, its tags lost
    return owned


def restored_env(
    instance: Instance, owner_id: str, pod_uid: str, pod: KubeObject | None
) -> dict[str, str]:
    """The env to PATCH back: what the instance has now plus our tags.

    PATCH replaces the env whole, so everything the instance still has is sent too.
    """
    env = {**instance.env, OWNER_ENV: owner_id, POD_UID_ENV: pod_uid}
    if pod is not None and is_batch(pod):
        env[STOP_ON_EXIT_ENV] = exit_nonce(pod_uid)
    return env


@dataclass(frozen=True)
class Lookalike:
    """An untagged instance that no row or pod names, called as we would name a pod of the node."""

    instance_id: str
    name: str
    namespace: str
    pod_name: str


def lookalikes(
    instances: Iterable[Instance], named: Mapping[str, str], pods: Sequence[KubeObject]
) -> list[Lookalike]:
    untagged = [
        i
        for i in instances
        if i.owner is None and i.id not in named and i.status is not InstanceStatus.TERMINATED
    ]
    if not untagged:
        return []  # the usual case: spare naming every pod
    names = {instance_name(pod): pod for pod in pods}
    found = []
    for instance in untagged:
        pod = names.get(instance.name)
        if pod is not None:
            meta = pod["metadata"]
            found.append(
                Lookalike(
                    instance.id, instance.name, meta.get("namespace", "default"), meta["name"]
                )
            )
    return found
