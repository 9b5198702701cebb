"""The decision of one tick: `plan(observation, settings, now) -> [Action]`.

Pure: no I/O, no clock, no randomness. Every rule of docs/architecture.md §2 to §4
lives here. The planner looks at each pod UID once, with its pod (if the object exists),
its mapping row (if we have one) and the owned instances tagged with that UID, and
decides what moves that triple one step closer to agreement. Creates are collected and admitted
last, oldest pod first, against the instance, spend and rate budgets.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from reconciler.core import daemonsets, ownership, placement, pod_past, refusals, registries, spend
from reconciler.core import pods as podinfo
from reconciler.core.actions import (
    Action,
    Adopt,
    Create,
    DeleteRow,
    EnsureRegistryAuth,
    Event,
    FinalizePod,
    PatchMetadata,
    PatchStatus,
    PodRef,
    RestoreTags,
    SaveRow,
    Terminate,
)
from reconciler.core.budgets import NamespaceCaps, NamespaceUse
from reconciler.core.config import Settings
from reconciler.core.domain import (
    BillingRecord,
    CreateRequest,
    GpuType,
    Instance,
    InstanceStatus,
    KubeObject,
)
from reconciler.core.mapping import MappingRecord, MappingState
from reconciler.core.node import build_node
from reconciler.core.offload import PendingPod, plan_offloads
from reconciler.core.ownership import Ownership
from reconciler.core.reasons import Notice, PodReason, TerminateReason
from reconciler.core.refusals import REFUSED_EVERYWHERE
from reconciler.core.spend import PriceDifference
from reconciler.core.stock import Place, usable
from reconciler.core.translate import status as pod_status
from reconciler.core.translate.container import is_batch
from reconciler.core.translate.env import EnvSources
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.request import create_requests, requests_out_of_stock

ORPHAN_DETAIL = "orphan: its pod is gone"
# Like the kubelet's FallbackToLogsOnError: the log's end, at most 80 lines or 2048 bytes.
LOG_TAIL_KEPT_LINES = 80
LOG_TAIL_KEPT_BYTES = 2048


@dataclass(frozen=True)
class CreateInputs:
    """What a create needs from Kubernetes besides the pod, fetched only for such pods."""

    job: KubeObject | None = None
    sources: EnvSources = field(default_factory=lambda: EnvSources({}, {}))
    registry_auth_id: str | None = None
    pull_secret: tuple[str, str, str] | None = field(default=None, repr=False)
    error: TranslationError | None = None


@dataclass(frozen=True)
class Observation:
    pods: Sequence[KubeObject]
    instances: Sequence[Instance]
    rows: Sequence[MappingRecord]
    catalog: Sequence[GpuType] = ()
    create_inputs: Mapping[str, CreateInputs] = field(default_factory=dict)
    exit_codes: Mapping[str, int | None] = field(default_factory=dict)
    """Exit codes read this tick from the logs of EXITED instances, by instance id; a
    read without the marker gives None (not known yet)."""
    rate_budget: int | None = None
    """RunPod requests we may still send in the current window; None when unknown."""
    pending: Sequence[PendingPod] = ()
    """Unscheduled Pending pods anywhere in the cluster, for offload mode."""
    node: KubeObject | None = None
    """The live virtual Node (cordon, taints), read when something new may start; None
    when not read or not registered (then the node as we register it)."""
    daemon_pods: Sequence[KubeObject] = ()
    """DaemonSet pods bound to the virtual node, which never run there."""
    refused: frozenset[Place] = frozenset()
    """Where RunPod lately refused creates for want of stock (`reconciler.core.stock`)."""
    exit_logs: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """The last log lines read with those exit codes, by instance id."""
    namespace_caps: Mapping[str, NamespaceCaps] = field(default_factory=dict)
    """Caps of the namespaces of pods waiting to be created (read only for those)."""
    billing: Sequence[BillingRecord] = ()
    """Charges of our instances read this tick (whole hours since the last read)."""
    spend: Mapping[str, float] = field(default_factory=dict)
    """USD charged so far by pod UID; only on ticks that read billing."""
    price_differences: Sequence[PriceDifference] = ()
    """Pods whose charge this tick's billing read found to differ from list price."""
    ownership: Ownership | None = None
    """Which instances are ours, as the engine worked it out from these pods, rows and
    instances; None when built without it (`ownership_of` then works it out)."""


@dataclass(frozen=True)
class _Waiting:
    """A pod that should get an instance, pending admission against the budgets."""

    pod: KubeObject
    row: MappingRecord | None
    candidates: tuple[CreateRequest, ...]
    pull_secret: tuple[str, str, str] | None


class _Tick:
    """The inputs of one plan, with the lookups every rule needs."""

    def __init__(self, obs: Observation, settings: Settings, now: datetime) -> None:
        self.obs, self.settings, self.now = obs, settings, now
        self.catalog = {gpu.id: gpu for gpu in obs.catalog}
        self.node = obs.node or build_node(settings, now)
        self.lookalikes: dict[str, str] = {}
        """Pod UID → an untagged instance named like its own: no create while it stands."""
        self.registries_ensured: set[str] = set()
        """Names of registry credentials this plan already ensures before a create."""

    def within(self, since: datetime | None, seconds: float) -> bool:
        return _within(self.now, since, seconds)

    def new_row(self, pod: KubeObject, state: MappingState) -> MappingRecord:
        ref = PodRef.of(pod)
        return MappingRecord(ref.uid, ref.namespace, ref.name, state, self.now, self.now)

    def save(self, old: MappingRecord | None, new: MappingRecord) -> list[Action]:
        if old is not None and old.same_as(new):
            return []
        return [SaveRow(new.changed(updated_at=self.now))]


def _within(now: datetime, since: datetime | None, seconds: float) -> bool:
    return since is not None and now - since < timedelta(seconds=seconds)


PlanError = Callable[[str, Exception], None]
"""Told of an error while planning one pod (the engine logs its traceback at debug)."""


def _ignore_error(_uid: str, _exc: Exception) -> None:
    """No one to tell."""


def plan(
    obs: Observation, settings: Settings, now: datetime, on_error: PlanError = _ignore_error
) -> list[Action]:
    tick = _Tick(obs, settings, now)
    pods = {podinfo.uid(p): p for p in obs.pods if podinfo.is_ours_to_run(p)}
    rows = {row.pod_uid: row for row in obs.rows}
    owners = ownership_of(obs, settings.owner_id)
    owned = owners.owned
    tick.lookalikes = _lookalikes(owners.lookalikes, pods)
    actions: list[Action] = _restore_tags(tick, owners.lost_tags, pods)
    actions += _leaks(tick) + _spend_annotations(tick, pods) + _price_differences(tick, pods)
    # Each UID is decided in the order the lists gave them, which is about the order
    # their objects lie in memory: at 10 000 pods a tenth faster than in UID order,
    # which is kept for the actions. A steady pod decides nothing and is not kept.
    decisions: dict[str, tuple[list[Action], _Waiting | None]] = {}
    for uid in dict.fromkeys(itertools.chain(pods, rows, owned)):
        try:
            decided, wait = _decide(tick, uid, pods.get(uid), rows.get(uid), owned.get(uid, []))
        except Exception as exc:  # one malformed pod never stops the others
            on_error(uid, exc)
            decided, wait = _undecidable(tick, pods.get(uid), rows.get(uid), uid in owned, exc)
        if decided or wait is not None:
            decisions[uid] = decided, wait
    waiting: list[_Waiting] = []
    for uid in sorted(decisions):
        decided, wait = decisions[uid]
        actions += decided
        if wait is not None:
            waiting.append(wait)
    offloads = (
        plan_offloads(obs.pending, settings, now, _offload_room(settings, pods, owned), tick.node)
        if obs.pending
        else []  # the usual tick: spare counting the room for none
    )
    return (
        offloads
        + actions
        + _admit(tick, waiting, owned, rows, pods)
        + daemonsets.notices(obs.daemon_pods, now)
    )


def _undecidable(
    t: _Tick, pod: KubeObject | None, row: MappingRecord | None, has_instance: bool, exc: Exception
) -> tuple[list[Action], None]:
    """A pod whose planning failed: a waiting reason while nothing runs for it (so it
    fails at --max-pending-time), else an Event only, never a decision about its instance."""
    if pod is None:
        return [], None
    message = f"the reconciler could not plan this pod: {type(exc).__name__}: {exc}"
    reason = exc.reason if isinstance(exc, TranslationError) else PodReason.INVALID_POD_SPEC
    if not has_instance and (row is None or row.state is MappingState.PENDING):
        try:
            return _cannot_create(t, pod, row, reason, message, False), None
        except Exception:  # no status can be built for it: the Event below says why
            pass
    return [Event(PodRef.of(pod), reason, message, warning=True)], None


def _offload_room(
    settings: Settings, pods: Mapping[str, KubeObject], owned: Mapping[str, list[Instance]]
) -> int:
    """Instances we may still add: the cap minus live pods of the node and orphans."""
    live = {
        uid
        for uid, pod in pods.items()
        if not podinfo.is_finished(pod) and not podinfo.is_deleting(pod)
    }
    return settings.max_instances - len(live | set(owned))


def ownership_of(obs: Observation, owner_id: str) -> Ownership:
    """Which of the observation's instances are ours: as the engine worked it out while
    observing, else (an observation built without it, or for another owner) now."""
    if obs.ownership is not None and obs.ownership.owner_id == owner_id:
        return obs.ownership
    pods = [p for p in obs.pods if podinfo.is_ours_to_run(p)]
    return Ownership.of(owner_id, obs.instances, obs.rows, pods)


def _lookalikes(
    found: Sequence[ownership.Lookalike], pods: Mapping[str, KubeObject]
) -> dict[str, str]:
    """Pod UID → the id of the look-alike named like its pod."""
    if not found:
        return {}
    by_name = {(PodRef.of(p).namespace, PodRef.of(p).name): uid for uid, p in pods.items()}
    return {by_name[(item.namespace, item.pod_name)]: item.instance_id for item in found}


def _restore_tags(
    t: _Tick, lost: Sequence[tuple[Instance, str]], pods: Mapping[str, KubeObject]
) -> list[Action]:
    """Put our tags back on owned instances that lost them; their pods carry on."""
    actions: list[Action] = []
    for instance, uid in lost:
        pod = pods.get(uid)
        ref = PodRef.of(pod) if pod is not None else None
        env = ownership.restored_env(instance, t.settings.owner_id, uid, pod)
        actions.append(RestoreTags(instance.id, env, ref))
        if ref is not None:
            actions.append(
                Event(
                    ref,
                    Notice.TAGS_RESTORED,
                    f"RunPod instance {instance.id} lost its owner tags (its env "
                    "was replaced); put them back",
                    warning=True,
                )
            )
    return actions


def _leaks(t: _Tick) -> list[Action]:
    """Instances RunPod bills after their pod ended: terminate them again, loudly."""
    if not t.obs.billing:
        return []  # billing was not read this tick (most ticks): spare walking the rows
    return [
        Terminate(
            leak.instance_id, TerminateReason.LEAK, spend.LEAK_REASON, leaked_seconds=leak.seconds
        )
        for leak in spend.leaks(t.obs.billing, t.obs.rows, t.settings.orphan_grace_time, t.now)
    ]


def _spend_annotations(t: _Tick, pods: Mapping[str, KubeObject]) -> list[Action]:
    actions: list[Action] = []
    for uid, usd in sorted(t.obs.spend.items()):
        pod = pods.get(uid)
        if pod is None or podinfo.is_deleting(pod):
            continue
        value = spend.annotation_value(usd)
        if podinfo.pod_annotations(pod).get(spend.SPEND_ANNOTATION) != value:
            actions.append(PatchMetadata(PodRef.of(pod), {spend.SPEND_ANNOTATION: value}))
    return actions


def _price_differences(t: _Tick, pods: Mapping[str, KubeObject]) -> list[Action]:
    """A Warning on each pod still there whose charge newly differs from list price."""
    return [
        Event(PodRef.of(pod), Notice.CHARGE_DIFFERS, difference.message(), warning=True)
        for difference in t.obs.price_differences
        if (pod := pods.get(difference.row.pod_uid)) is not None and not podinfo.is_deleting(pod)
    ]


def needs_create_inputs(
    pod: KubeObject,
    row: MappingRecord | None,
    owners: Ownership,
    settings: Settings,
    now: datetime,
) -> bool:
    """Whether the engine should fetch this pod's Job, Secrets and ConfigMaps this tick."""
    if podinfo.uid(pod) in owners.owned or podinfo.is_deleting(pod) or podinfo.is_finished(pod):
        return False
    if row is None:
        return not pod_past.has_past(pod, owners)
    if row.state is MappingState.PENDING:
        return True
    return row.state is MappingState.CREATING and not _within(
        now, row.attempt_started_at, settings.create_grace_time
    )


# --- one pod UID -----------------------------------------------------------------


def _decide(
    t: _Tick, uid: str, pod: KubeObject | None, row: MappingRecord | None, instances: list[Instance]
) -> tuple[list[Action], _Waiting | None]:
    keep, extras = _split_duplicates(t, instances, row, pod)
    actions: list[Action] = [_terminate_duplicate(pod, extra) for extra in extras]
    if pod is None:
        return actions + _without_pod(t, row, keep), None
    if podinfo.is_deleting(pod):
        return actions + _deleting(t, pod, row, keep), None
    if podinfo.is_finished(pod):
        return actions + _finished(t, pod, row, keep), None
    if keep is not None:
        return actions + _with_instance(t, pod, row, keep), None
    decided, wait = _without_instance(t, pod, row)
    return actions + decided, wait


def _split_duplicates(
    t: _Tick, instances: list[Instance], row: MappingRecord | None, pod: KubeObject | None
) -> tuple[Instance | None, list[Instance]]:
    """The instance to keep and the duplicates to terminate now.

    Keep the one the pod's runpod.io/pod-id names (every writer reads the same pod, so
    writers with different databases agree), else the mapped one, else the oldest. A
    duplicate younger than the create grace may be another writer's create it has yet to
    record: it is left alone until the grace is over (docs/architecture.md §4, Duplicates heal).
    """
    if len(instances) < 2:
        return (instances[0] if instances else None), []
    named = podinfo.pod_annotations(pod).get(podinfo.POD_ID_ANNOTATION) if pod else None
    mapped = row.instance_id if row is not None else None
    ordered = sorted(instances, key=lambda i: (i.id != named, i.id != mapped, _age_key(i)))
    extras = [i for i in ordered[1:] if not t.within(i.created_at, t.settings.create_grace_time)]
    return ordered[0], extras


def _age_key(instance: Instance) -> tuple[str, str]:
    return (instance.created_at.isoformat() if instance.created_at else "", instance.id)


def _terminate_duplicate(pod: KubeObject | None, extra: Instance) -> Action:
    ref = PodRef.of(pod) if pod is not None else None
    return Terminate(extra.id, TerminateReason.DUPLICATE, "duplicate instance for one pod", ref)


def _without_pod(t: _Tick, row: MappingRecord | None, instance: Instance | None) -> list[Action]:
    if instance is not None:
        return _orphan(t, row, instance)
    if row is None:
        return []
    if row.state is MappingState.CREATING and t.within(
        row.attempt_started_at, t.settings.create_grace_time
    ):
        return []  # an in-doubt create may still show up; it is an orphan then
    if not row.state.finished:
        return t.save(row, _ended(t, row))
    # Kept for `reconciler cost` and the leak audit as long as --cost-history says.
    if not t.within(row.ended_at or row.updated_at, t.settings.cost_history_days * 86400):
        return [DeleteRow(row.pod_uid)]
    return []


def _ended(t: _Tick, row: MappingRecord) -> MappingRecord:
    return row.changed(
        state=MappingState.TERMINATED,
        last_instance_status="TERMINATED",
        ended_at=row.ended_at or t.now,
    )


def _orphan(t: _Tick, row: MappingRecord | None, instance: Instance) -> list[Action]:
    """An owned instance whose pod is gone: terminated on its second sighting, once old."""
    if row is None:
        row = MappingRecord(
            instance.pod_uid or instance.id,
            "",
            instance.name,
            MappingState.RUNNING,
            t.now,
            t.now,
            instance_id=instance.id,
        )
    if row.state is MappingState.TERMINATING:
        return [Terminate(instance.id, TerminateReason.ORPHAN, ORPHAN_DETAIL, None, row)]
    sightings = row.orphan_sightings + 1
    old_enough = not t.within(instance.created_at, t.settings.orphan_grace_time)
    if sightings >= 2 and old_enough:
        return [
            Terminate(
                instance.id,
                TerminateReason.ORPHAN,
                ORPHAN_DETAIL,
                None,
                row.changed(state=MappingState.TERMINATING, orphan_sightings=sightings),
            )
        ]
    return t.save(None, row.changed(orphan_sightings=sightings))


def _deleting(
    t: _Tick, pod: KubeObject, row: MappingRecord | None, instance: Instance | None
) -> list[Action]:
    """A pod being deleted is finished like a kubelet would: the instance is terminated
    and confirmed gone, then the pod gets a terminal phase, then the object is deleted.

    The phase comes only once the instance is gone: a Job that replaces only failed
    pods starts the replacement on that phase, and must not run two at once.
    """
    ref = PodRef.of(pod)
    if instance is not None:
        return _terminate(t, ref, row, instance, TerminateReason.POD_DELETED, "pod deleted")
    if (
        row is not None
        and row.state is MappingState.CREATING
        and t.within(row.attempt_started_at, t.settings.create_grace_time)
    ):
        return []  # wait: the in-doubt create must be found and terminated first
    done = _ended(t, row) if row is not None else None
    status = pod_status.deleted_status(
        pod, row.instance_id if row else None, exit_code=row.exit_code if row else None, now=t.now
    )
    if status is None and podinfo.deletion_is_immediate(pod):
        # Terminal and deleted at once already: finalizers of others hold the object.
        return t.save(row, done) if row is not None and done is not None else []
    return [FinalizePod(ref, done, status)]


def _finished(
    t: _Tick, pod: KubeObject, row: MappingRecord | None, instance: Instance | None
) -> list[Action]:
    if instance is not None:
        return _terminate(
            t, PodRef.of(pod), row, instance, TerminateReason.POD_ENDED, f"pod {podinfo.phase(pod)}"
        )
    if row is not None and not row.state.finished:
        return t.save(row, _ended(t, row))
    return []


def _terminate(
    t: _Tick,
    ref: PodRef,
    row: MappingRecord | None,
    instance: Instance,
    reason: TerminateReason,
    why: str,
) -> list[Action]:
    row = row or _adopted_row(t, ref, instance)
    first = row.state is not MappingState.TERMINATING
    actions: list[Action] = [
        Terminate(instance.id, reason, why, ref, row.changed(state=MappingState.TERMINATING))
    ]
    if first:
        actions.append(
            Event(
                ref,
                Notice.TERMINATING_INSTANCE,
                f"terminating RunPod instance {instance.id}: {why}",
            )
        )
    return actions


# --- a live pod with its instance --------------------------------------------------


def _with_instance(
    t: _Tick, pod: KubeObject, row: MappingRecord | None, instance: Instance
) -> list[Action]:
    actions: list[Action] = []
    if row is None or row.instance_id != instance.id:
        actions, row = _adopt(t, PodRef.of(pod), row, instance)
    if row.state is MappingState.TERMINATING or row.state.finished:
        return [
            *actions,
            Terminate(
                instance.id,
                TerminateReason.ALREADY_DECIDED,
                row.reason.value if row.reason else "finished",
                PodRef.of(pod),
                row,
            ),
        ]
    if podinfo.deadline_passed(pod, t.now):
        return actions + _fail(
            t,
            pod,
            row,
            instance,
            PodReason.DEADLINE_EXCEEDED,
            "pod ran longer than spec.activeDeadlineSeconds",
        )
    return actions + _follow_instance(t, pod, row, instance)


def _adopt(
    t: _Tick, ref: PodRef, row: MappingRecord | None, instance: Instance
) -> tuple[list[Action], MappingRecord]:
    adopted = _adopted_row(t, ref, instance, row)
    return [
        Adopt(ref, instance, adopted),
        Event(
            ref,
            Notice.ADOPTED_INSTANCE,
            f"found RunPod instance {instance.id} for this pod "
            "and took it over (earlier create or rebuilt state)",
        ),
    ], adopted


def _adopted_row(
    t: _Tick, ref: PodRef, instance: Instance, row: MappingRecord | None = None
) -> MappingRecord:
    base = row or MappingRecord(
        ref.uid, ref.namespace, ref.name, MappingState.RUNNING, t.now, t.now
    )
    return base.changed(
        state=MappingState.RUNNING,
        instance_id=instance.id,
        instance_name=instance.name,
        attempt_id=None,
        gpu_type_id=instance.gpu_type_id,
        datacenter_id=instance.datacenter_id,
        cost_per_hr=instance.cost_per_hr,
        last_instance_status=instance.status.value,
        reason=None,
        last_error=None,
        orphan_sightings=0,
    )


def _follow_instance(
    t: _Tick, pod: KubeObject, row: MappingRecord, instance: Instance
) -> list[Action]:
    status = instance.status
    if status is InstanceStatus.ERROR:
        return _fail(
            t,
            pod,
            row,
            instance,
            PodReason.INSTANCE_ERROR,
            f"RunPod instance {instance.id} is in an unrecoverable error state",
        )
    if status is InstanceStatus.EXITED:
        return _exited(t, pod, row, instance)
    if status is InstanceStatus.UNKNOWN:
        return []  # never act on a status we do not understand
    return _mirror(t, pod, row, instance)


def _exited(t: _Tick, pod: KubeObject, row: MappingRecord, instance: Instance) -> list[Action]:
    if not is_batch(pod):
        return _fail(
            t,
            pod,
            row,
            instance,
            PodReason.INSTANCE_STOPPED,
            f"RunPod instance {instance.id} was stopped outside Kubernetes",
        )
    code = row.exit_code if row.exit_code is not None else t.obs.exit_codes.get(instance.id)
    if code is not None:
        return _finish(t, pod, row.changed(exit_code=code, exited_at=None), instance)
    # Not readable (yet): the log route fails, or the backfill lacks the marker. The
    # stopped instance still bills its disk, so this lasts --exit-code-timeout at most.
    if row.exited_at is None:
        return t.save(row, row.changed(exited_at=t.now))
    if t.within(row.exited_at, t.settings.exit_code_timeout):
        return []
    return _exit_code_unknown(t, pod, row, instance)


def _exit_code_unknown(
    t: _Tick, pod: KubeObject, row: MappingRecord, instance: Instance
) -> list[Action]:
    """Give up on the code: fail the pod with the log's end on it, end the billing."""
    ref = PodRef.of(pod)
    summary = (
        f"the exit code of RunPod instance {instance.id} could not be read within "
        f"{int(t.settings.exit_code_timeout)} s of its stop"
    )
    tail = _log_tail(t.obs.exit_logs.get(instance.id, ()))
    shown = f"{summary}; last log lines:\n{tail}" if tail else summary
    status = pod_status.pod_status(
        pod, None, exit_code=None, now=t.now, reason=PodReason.EXIT_CODE_UNKNOWN, message=shown
    )
    # The row keeps the summary only: log lines may hold anything, and stay off the disk.
    failed = row.changed(
        state=MappingState.TERMINATING,
        reason=PodReason.EXIT_CODE_UNKNOWN,
        last_error=summary,
        status_hash=pod_status.status_fingerprint(status),
    )
    return [
        PatchStatus(ref, status, failed),
        Event(ref, PodReason.EXIT_CODE_UNKNOWN, summary, warning=True),
        Terminate(
            instance.id, TerminateReason.POD_FAILED, PodReason.EXIT_CODE_UNKNOWN.value, ref, failed
        ),
    ]


def _log_tail(lines: Sequence[str]) -> str:
    tail = "\n".join(lines[-LOG_TAIL_KEPT_LINES:])
    return tail.encode()[-LOG_TAIL_KEPT_BYTES:].decode("utf-8", "ignore")


def _mirror(t: _Tick, pod: KubeObject, row: MappingRecord, instance: Instance) -> list[Action]:
    """Copy the instance's state onto the pod: status, annotations and the row."""
    key = pod_status.mirror_key(pod, instance, t.now)
    mirrored = _mirrored_fields(row, instance)
    if key is not None and key == row.mirror_key and _holds(row, mirrored):
        # The inputs of the tick that left the pod mirrored: the outputs are the same
        # too. Not computing them is most of what a steady tick at scale saves.
        return []
    ref = PodRef.of(pod)
    status = pod_status.pod_status(pod, instance, exit_code=None, now=t.now)
    fingerprint = pod_status.status_fingerprint(status)
    annotations = _annotations_to_patch(pod, instance)
    # No key while annotations wait for their patch, or one that failed would never
    # be retried. Otherwise the key is stored even when our own patches are about to
    # renew the resourceVersion: the next tick computes once more and stores the new one.
    new_row = row.changed(
        **mirrored, status_hash=fingerprint, mirror_key=None if annotations else key
    )
    if fingerprint != row.status_hash:
        # One request for both: the status subresource takes the annotations along.
        # No Event says the pod started: the status does (phase, the container's
        # startedAt, the Ready condition), as a virtual kubelet's does; the Events
        # are for what only we know, the instance created and the instance deleted.
        return [PatchStatus(ref, status, new_row, annotations)]
    actions: list[Action] = t.save(row, new_row)
    if annotations:
        actions.append(PatchMetadata(ref, annotations))
    return actions


def _mirrored_fields(row: MappingRecord, instance: Instance) -> dict[str, object]:
    """The row fields mirroring sets, besides the status fingerprint and the key."""
    return {
        "last_instance_status": instance.status.value,
        "cost_per_hr": instance.cost_per_hr,
        "datacenter_id": instance.datacenter_id or row.datacenter_id,
        "reason": None,
        "last_error": None,
        "orphan_sightings": 0,
    }


def _holds(row: MappingRecord, fields: Mapping[str, object]) -> bool:
    # One C call reads all the fields: this runs for every pod on every tick.
    return attrgetter(*fields)(row) == tuple(fields.values())


def _annotations_to_patch(pod: KubeObject, instance: Instance) -> dict[str, str | None]:
    current = podinfo.pod_annotations(pod)
    wanted = pod_status.metadata_annotations(instance)
    return {key: value for key, value in wanted.items() if current.get(key) != value}


def _finish(t: _Tick, pod: KubeObject, row: MappingRecord, instance: Instance) -> list[Action]:
    """A batch pod's process ended: record how, then release the instance."""
    ref = PodRef.of(pod)
    status = pod_status.pod_status(pod, instance, exit_code=row.exit_code, now=t.now)
    done = row.changed(
        state=MappingState.TERMINATING,
        status_hash=pod_status.status_fingerprint(status),
        last_instance_status=instance.status.value,
    )
    outcome = "succeeded" if row.exit_code == 0 else f"failed (exit code {row.exit_code})"
    return [
        PatchStatus(ref, status, done),
        Event(ref, Notice.COMPLETED, f"process {outcome}", warning=row.exit_code != 0),
        Terminate(instance.id, TerminateReason.PROCESS_ENDED, f"pod {outcome}", ref, done),
    ]


def _fail(
    t: _Tick,
    pod: KubeObject,
    row: MappingRecord | None,
    instance: Instance | None,
    reason: PodReason,
    message: str,
) -> list[Action]:
    """Fail the pod with a reason kubectl shows, and release its instance if any."""
    ref = PodRef.of(pod)
    row = row or t.new_row(pod, MappingState.FAILED)
    status = pod_status.pod_status(
        pod, None, exit_code=None, now=t.now, reason=reason, message=message
    )
    state = MappingState.TERMINATING if instance is not None else MappingState.FAILED
    failed = row.changed(
        state=state,
        reason=reason,
        last_error=message,
        status_hash=pod_status.status_fingerprint(status),
        ended_at=row.ended_at or (None if instance is not None else t.now),
    )
    actions: list[Action] = [
        PatchStatus(ref, status, failed),
        Event(ref, reason, message, warning=True),
    ]
    if instance is not None:
        actions.append(
            Terminate(instance.id, TerminateReason.POD_FAILED, reason.value, ref, failed)
        )
    return actions


# --- a live pod without an instance ------------------------------------------------


def _without_instance(
    t: _Tick, pod: KubeObject, row: MappingRecord | None
) -> tuple[list[Action], _Waiting | None]:
    if row is None:
        rebuilt = pod_past.rebuilt_row(pod, t.now, ownership_of(t.obs, t.settings.owner_id))
        if rebuilt is not None:
            return [SaveRow(rebuilt)], None
    if row is not None and (row.state.finished or row.state is MappingState.TERMINATING):
        return _restore_final_status(t, pod, row), None
    if row is not None and row.state is MappingState.RUNNING:
        return _instance_missing(t, pod, row), None
    if (
        row is not None
        and row.state is MappingState.CREATING
        and t.within(row.attempt_started_at, t.settings.create_grace_time)
    ):
        return [], None  # in doubt: the instance may still appear in the list
    if podinfo.deadline_passed(pod, t.now):
        return _fail(
            t,
            pod,
            row,
            None,
            PodReason.DEADLINE_EXCEEDED,
            "pod waited longer than spec.activeDeadlineSeconds",
        ), None
    lookalike = t.lookalikes.get(podinfo.uid(pod))
    if lookalike is not None:
        # Probably this pod's own instance, its tags and our records lost: a create
        # would pay twice. It is never touched either; a person decides.
        return _cannot_create(
            t,
            pod,
            row,
            PodReason.UNOWNED_LOOKALIKE,
            (
                f"RunPod instance {lookalike} is named like this pod's but carries no owner tag "
                "and nothing of ours records it; not creating another. Delete it, or put the "
                "tags back, to go on"
            ),
            False,
        ), None
    if row is None and pod_past.ran_before(pod):
        return _fail(t, pod, None, None, PodReason.INSTANCE_LOST, pod_past.RAN_UNRECORDED), None
    return _prepare_create(t, pod, row)


def _restore_final_status(t: _Tick, pod: KubeObject, row: MappingRecord) -> list[Action]:
    """Finished work never runs again; make sure the pod shows how it ended."""
    final = row.changed(
        state=MappingState.FAILED if row.reason else MappingState.TERMINATED,
        ended_at=row.ended_at or t.now,
    )
    if row.exit_code is not None:
        ended = Instance(row.instance_id or "", row.instance_name or "", InstanceStatus.EXITED)
        status = pod_status.pod_status(pod, ended, exit_code=row.exit_code, now=t.now)
    else:
        reason = row.reason or PodReason.INSTANCE_LOST
        status = pod_status.pod_status(
            pod,
            None,
            exit_code=None,
            now=t.now,
            reason=reason,
            message=row.last_error or "the RunPod instance is gone",
        )
    fingerprint = pod_status.status_fingerprint(status)
    final = final.changed(status_hash=fingerprint)
    if fingerprint != row.status_hash:
        return [PatchStatus(PodRef.of(pod), status, final)]
    return t.save(row, final)


def _instance_missing(t: _Tick, pod: KubeObject, row: MappingRecord) -> list[Action]:
    if t.within(row.attempt_started_at, t.settings.create_grace_time):
        return []  # a new instance can lag behind in the list
    return _fail(
        t,
        pod,
        row,
        None,
        PodReason.INSTANCE_LOST,
        f"RunPod instance {row.instance_id} disappeared while the pod was running",
    )


def _prepare_create(
    t: _Tick, pod: KubeObject, row: MappingRecord | None
) -> tuple[list[Action], _Waiting | None]:
    inputs = t.obs.create_inputs.get(podinfo.uid(pod))
    if inputs is None or not t.obs.catalog:
        return [], None  # the engine could not gather what a create needs this tick
    try:
        if inputs.error is not None:
            raise inputs.error
        candidates = create_requests(
            pod,
            inputs.job,
            inputs.sources,
            t.obs.catalog,
            t.settings,
            t.settings.owner_id,
            inputs.registry_auth_id,
        )
    except TranslationError as error:
        return _cannot_create(t, pod, row, error.reason, error.message, error.permanent), None
    if requests_out_of_stock(candidates, t.obs.catalog):
        return _cannot_create(
            t,
            pod,
            row,
            PodReason.CAPACITY_UNAVAILABLE,
            "every GPU type that fits this pod is out of stock",
            False,
        ), None
    candidates = usable(candidates, t.obs.refused)
    if not candidates:
        return _cannot_create(
            t, pod, row, PodReason.CAPACITY_UNAVAILABLE, REFUSED_EVERYWHERE, False
        ), None
    actions: list[Action] = []
    if row is not None and row.reason:
        # The last attempt failed (no capacity, budget): retry, still showing why.
        if _waited_too_long(t, pod):
            return _fail(t, pod, row, None, row.reason, _gave_up(t, row.last_error)), None
        actions, row = _show_waiting(t, pod, row, row.reason, row.last_error or row.reason)
        pause = refusals.retry_after(row.reason)
        if pause is not None and t.within(row.updated_at, pause):
            return actions, None
    return actions, _Waiting(pod, row, tuple(candidates), inputs.pull_secret)


def _cannot_create(
    t: _Tick,
    pod: KubeObject,
    row: MappingRecord | None,
    reason: PodReason,
    message: str,
    permanent: bool,
) -> list[Action]:
    """Wait with a visible reason, or fail once the reason is permanent or too old."""
    if permanent:
        return _fail(t, pod, row, None, reason, message)
    if _waited_too_long(t, pod):
        return _fail(t, pod, row, None, reason, _gave_up(t, message))
    actions, _ = _show_waiting(t, pod, row, reason, message)
    return actions


def _waited_too_long(t: _Tick, pod: KubeObject) -> bool:
    return podinfo.age(pod, t.now) > timedelta(seconds=t.settings.max_pending_time)


def _gave_up(t: _Tick, message: str | None) -> str:
    return f"{message or 'no instance'}; gave up after {int(t.settings.max_pending_time)} s"


def _show_waiting(
    t: _Tick, pod: KubeObject, row: MappingRecord | None, reason: PodReason, message: str
) -> tuple[list[Action], MappingRecord]:
    """Keep the pod Pending with `reason` in kubectl's STATUS column; Event on change."""
    ref = PodRef.of(pod)
    row = row or t.new_row(pod, MappingState.PENDING)
    status = pod_status.pod_status(
        pod, None, exit_code=None, now=t.now, reason=reason, message=message, pending=True
    )
    fingerprint = pod_status.status_fingerprint(status)
    waiting = row.changed(
        state=MappingState.PENDING,
        reason=reason,
        last_error=message,
        attempt_id=None,
        status_hash=fingerprint,
    )
    actions: list[Action] = []
    if row.reason != reason:
        actions.append(Event(ref, reason, message, warning=True))
    if fingerprint != row.status_hash:
        return [*actions, PatchStatus(ref, status, waiting)], waiting
    return actions + t.save(row, waiting), waiting


# --- admission: budgets and pacing -------------------------------------------------


def _admit(
    t: _Tick,
    waiting: list[_Waiting],
    owned: Mapping[str, list[Instance]],
    rows: dict[str, MappingRecord],
    pods: Mapping[str, KubeObject],
) -> list[Action]:
    """Oldest pods first, within the global caps, their namespace's caps and the rate
    budget."""
    if not waiting:
        return []  # the steady tick: spare counting what every namespace spends
    live = [i for group in owned.values() for i in group]
    in_doubt = [
        r
        for r in rows.values()
        if r.state is MappingState.CREATING
        and r.pod_uid not in owned
        and t.within(r.attempt_started_at, t.settings.create_grace_time)
    ]
    count, spend = len(live) + len(in_doubt), sum(i.cost_per_hr for i in live)
    use = namespace_use(owned, in_doubt, rows, pods)
    slots = create_slots(t.obs, t.settings)
    actions: list[Action] = []
    for wait in sorted(waiting, key=lambda w: podinfo.oldest_first(w.pod)):
        closed = placement.closed_to(wait.pod, t.node)
        if closed is not None:
            cordoned = bool((t.node.get("spec") or {}).get("unschedulable"))
            actions += _cannot_create(
                t,
                wait.pod,
                wait.row,
                PodReason.NODE_CORDONED if cordoned else PodReason.NODE_TAINTED,
                f"no new instance: {closed}",
                False,
            )
            continue
        namespace = PodRef.of(wait.pod).namespace
        ns_use = use.setdefault(namespace, NamespaceUse())
        caps = t.obs.namespace_caps.get(namespace)
        # Only candidates within both caps are tried: RunPod may accept any of them.
        affordable = tuple(
            c
            for c in wait.candidates
            if spend + _hourly_cost(t, c) <= t.settings.max_hourly_spend
            and ns_use.refusal(caps, _hourly_cost(t, c)) is None
        )
        cheapest = min(_hourly_cost(t, c) for c in wait.candidates)
        refusal = ns_use.refusal(caps, cheapest)
        if count + 1 > t.settings.max_instances or (refusal is None and not affordable):
            actions += _cannot_create(
                t,
                wait.pod,
                wait.row,
                PodReason.BUDGET_EXCEEDED,
                _budget_message(t, count, spend, cheapest),
                False,
            )
        elif refusal is not None:
            actions += _cannot_create(
                t,
                wait.pod,
                wait.row,
                PodReason.BUDGET_EXCEEDED,
                f"waiting for budget: {refusal}",
                False,
            )
        elif slots > 0:
            actions += _create(t, wait, affordable)
            # Count the dearest candidate tried: RunPod may accept any of them.
            dearest = max(_hourly_cost(t, c) for c in affordable)
            spend += dearest
            ns_use.instances += 1
            ns_use.hourly_spend += dearest
            count, slots = count + 1, slots - 1
    return actions


def namespace_use(
    owned: Mapping[str, list[Instance]],
    in_doubt: Iterable[MappingRecord],
    rows: Mapping[str, MappingRecord],
    pods: Mapping[str, KubeObject],
) -> dict[str, NamespaceUse]:
    """Live instances and their list prices per namespace (in-doubt creates count too)."""
    use: dict[str, NamespaceUse] = defaultdict(NamespaceUse)
    for uid, group in owned.items():
        namespace = _namespace_of(uid, rows, pods)
        if namespace is not None:
            use[namespace].instances += len(group)
            use[namespace].hourly_spend += sum(i.cost_per_hr for i in group)
    for row in in_doubt:
        use[row.namespace].instances += 1
    return dict(use)


def _namespace_of(
    uid: str, rows: Mapping[str, MappingRecord], pods: Mapping[str, KubeObject]
) -> str | None:
    if uid in pods:
        return PodRef.of(pods[uid]).namespace
    row = rows.get(uid)
    return row.namespace if row is not None and row.namespace else None


def create_slots(obs: Observation, settings: Settings) -> int:
    """Creates one tick may plan: the cap, and the rate budget (our share of it) less a
    few requests kept for terminates and the next list."""
    budget = obs.rate_budget
    rate_slots = settings.max_creates_per_tick if budget is None else max(0, budget - 3)
    return min(settings.max_creates_per_tick, rate_slots)


def _hourly_cost(t: _Tick, candidate: CreateRequest) -> float:
    gpu = t.catalog.get(candidate.gpu_type_id)
    return 0.0 if gpu is None else gpu.price(candidate.cloud) * candidate.gpu_count


def _budget_message(t: _Tick, count: int, spend: float, cost: float) -> str:
    return (
        f"waiting for budget: {count}/{t.settings.max_instances} instances, "
        f"${spend:.2f}/h of ${t.settings.max_hourly_spend:.2f}/h spent, "
        f"this pod needs at least ${cost:.2f}/h"
    )


def _create(t: _Tick, wait: _Waiting, candidates: tuple[CreateRequest, ...]) -> list[Action]:
    ref = PodRef.of(wait.pod)
    base = wait.row or t.new_row(wait.pod, MappingState.CREATING)
    attempt = hashlib.sha256(f"{ref.uid}/{t.now.isoformat()}".encode()).hexdigest()[:16]
    # The previous reason stays on the intent row, so that the executor raises an
    # Event only when a failed create fails for a new reason.
    intent = base.changed(
        state=MappingState.CREATING,
        attempt_id=attempt,
        attempt_started_at=t.now,
        instance_name=candidates[0].name,
        updated_at=t.now,
    )
    if wait.pull_secret is None:
        return [Create(ref, intent, candidates)]
    registry, username, password = wait.pull_secret
    name = registries.registry_name(t.settings.owner_id, registry, username, password)
    ensure: list[Action] = []
    if name not in t.registries_ensured:
        t.registries_ensured.add(name)
        ensure.append(EnsureRegistryAuth(name, username, password, ref))
    return [*ensure, Create(ref, intent, candidates, registry_name=name)]
