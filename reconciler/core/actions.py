"""What a tick decides to do: plain values from the planner, carried out by the executor.

Each action names the pod it concerns by a `PodRef` (enough to patch, delete or record
an Event on it) and carries everything its side effect needs, so the executor decides
nothing. Each says what `reconciler sync --dry-run` lists of it: `shown()` gives its
(subject, detail), so no list of the actions is kept elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.core.cluster_row import ClusterRow
from reconciler.core.domain import ClusterRequest, CreateRequest, Instance, KubeObject
from reconciler.core.mapping import MappingRow
from reconciler.core.reasons import EventReason, OffloadTrigger, TerminateReason, VolumeNotice

# Terminations after which the pod object stays, and so should its log.
_ENDS_THE_POD = frozenset(
    {TerminateReason.PROCESS_ENDED, TerminateReason.POD_FAILED, TerminateReason.START_FAILED}
)
_POD_STAYS = frozenset(
    {
        TerminateReason.POD_ENDED,
        TerminateReason.PROCESS_ENDED,
        TerminateReason.POD_FAILED,
        TerminateReason.ALREADY_DECIDED,
    }
)


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, pod: KubeObject) -> PodRef:
        meta = pod["metadata"]
        return cls(meta.get("namespace", "default"), meta["name"], meta["uid"])

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class SaveRow:
    """Upsert the mapping row (the planner only emits it when something changed)."""

    row: MappingRow

    def shown(self) -> tuple[str, str]:
        return f"{self.row.namespace}/{self.row.name}", self.row.state.value


@dataclass(frozen=True)
class DeleteRow:
    """Forget a finished mapping whose pod and instance are both long gone."""

    pod_uid: str

    def shown(self) -> tuple[str, str]:
        return "", ""


@dataclass(frozen=True)
class Create:
    """Create an instance, trying the ranked candidates in order (docs/architecture.md §4).

    `row` is the intent to commit before the first call (state creating, attempt id).
    """

    pod: PodRef
    row: MappingRow
    candidates: tuple[CreateRequest, ...]
    registry_name: str | None = None
    """The name of our registry credential the pod's image is pulled with: the
    `EnsureRegistryAuth` planned before this create holds it, and its id goes into every
    candidate."""
    own_registry_names: frozenset[str] = frozenset()
    """The names of our credentials made from the pod's own imagePullSecrets: the only
    ones of ours its runpod.io/container-registry-auth-id may name (besides
    --registry-auth-ids; `core.resources.registries.named_refusal`)."""

    def shown(self) -> tuple[str, str]:
        return str(self.pod), ", ".join(c.offer_id for c in self.candidates)


@dataclass(frozen=True)
class EnsureRegistryAuth:
    """Make sure RunPod holds a pod's image pull credential under our name
    (`core.resources.registries.registry_name`, docs/architecture.md §3, "Cloud resources").

    Found by that name in the account's list (read once per tick, only when needed), it
    is ours and is used, also when the answer of the call that made it was lost;
    otherwise it is created. Planned once per name, before the creates that use it.
    """

    name: str
    username: str
    password: str = field(repr=False)
    pod: PodRef

    def shown(self) -> tuple[str, str]:
        return str(self.pod), self.name


@dataclass(frozen=True)
class DeleteRegistryAuth:
    """Delete a registry credential of ours that no instance uses any more."""

    registry_id: str
    name: str

    @property
    def subject(self) -> str:
        """What it acts on, for the log and the tick's errors."""
        return f"registry credential {self.registry_id}"

    def shown(self) -> tuple[str, str]:
        return self.registry_id, self.name


@dataclass(frozen=True)
class ClaimRef:
    """A PersistentVolumeClaim an action concerns (enough to patch it or record an Event)."""

    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, claim: KubeObject) -> ClaimRef:
        meta = claim["metadata"]
        return cls(meta.get("namespace", "default"), meta["name"], meta["uid"])

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class CreateNetworkVolume:
    """Hold the claim (`hold`, a patch: our finalizer, the volume's name and the time it
    is asked for), POST a network volume for it (journal row committed first), then its
    PV."""

    claim: ClaimRef
    name: str
    size_gb: int
    datacenter: str
    type: str | None
    claim_object: KubeObject = field(repr=False)
    storage_class: KubeObject = field(repr=False)
    node_name: str = ""
    hold: KubeObject | None = field(default=None, repr=False)

    def shown(self) -> tuple[str, str]:
        return str(self.claim), f"{self.size_gb} GB in {self.datacenter}"


@dataclass(frozen=True)
class ReleaseClaim:
    """Take the provisioner's finalizer off a claim (`patch`): a PV names it now, or it
    was deleted before RunPod made its volume."""

    claim: ClaimRef
    patch: KubeObject = field(repr=False)
    unmade: bool = False
    """Let go because the list shows no volume for it: that waits, as a create does,
    while a dead writer's create may still land (the list may lag behind it)."""

    def shown(self) -> tuple[str, str]:
        return str(self.claim), ""


@dataclass(frozen=True)
class CreateVolumeObject:
    """Make the PV of a volume of ours already at RunPod (a create whose answer was lost)."""

    claim: ClaimRef
    volume: KubeObject = field(repr=False)

    def shown(self) -> tuple[str, str]:
        return str(self.claim), ""


@dataclass(frozen=True)
class ResizeNetworkVolume:
    """PATCH the volume's size, then the PV's capacity and the claim's status."""

    claim: ClaimRef
    volume_id: str
    size_gb: int
    pv_name: str

    def shown(self) -> tuple[str, str]:
        return str(self.claim), f"{self.volume_id} to {self.size_gb} GB"


@dataclass(frozen=True)
class DeleteNetworkVolume:
    """DELETE a volume of ours nothing mounts (journal row first), then its PV: a
    released one's, or none (`pv_name` None) for a duplicate no PV ever named."""

    volume_id: str
    pv_name: str | None

    @property
    def subject(self) -> str:
        """What it acts on, for the log and the tick's errors."""
        return f"network volume {self.volume_id}" if self.pv_name is None else f"PV {self.pv_name}"

    def shown(self) -> tuple[str, str]:
        return self.pv_name or "(no PV)", self.volume_id


@dataclass(frozen=True)
class DeleteVolumeObject:
    """Delete a released PV whose volume is gone already."""

    pv_name: str

    @property
    def subject(self) -> str:
        """What it acts on, for the log and the tick's errors."""
        return f"PV {self.pv_name}"

    def shown(self) -> tuple[str, str]:
        return self.pv_name, ""


@dataclass(frozen=True)
class MarkClaimSelected:
    """Write `volume.kubernetes.io/selected-node` on a WaitForFirstConsumer claim that a
    pod of the virtual node uses (those pods bypass the scheduler, which writes it);
    `node_name` None takes it off: the claim's consumers went before its volume could
    be placed, and it waits for the next one (as a provisioner asks to reschedule)."""

    claim: ClaimRef
    node_name: str | None

    def shown(self) -> tuple[str, str]:
        return str(self.claim), ""


@dataclass(frozen=True)
class ClaimEvent:
    claim: ClaimRef
    reason: VolumeNotice
    message: str
    warning: bool = False

    def shown(self) -> tuple[str, str]:
        return str(self.claim), self.reason.value


@dataclass(frozen=True)
class Adopt:
    """Record an owned instance we found for a pod (in-doubt create, or state rebuilt)."""

    pod: PodRef
    instance: Instance
    row: MappingRow

    def shown(self) -> tuple[str, str]:
        return str(self.pod), ""


@dataclass(frozen=True)
class Terminate:
    """DELETE an owned instance. `row` (if any) is saved as terminating first.

    `reason` is for code (metrics, tests); `detail` says the same in words, for the log,
    the Event and `--dry-run`.
    """

    instance_id: str
    reason: TerminateReason
    detail: str
    pod: PodRef | None = None
    row: MappingRow | None = None
    leaked_seconds: float = 0.0
    """For a leak: seconds from the pod's end plus the grace until this termination."""

    @property
    def keeps_log(self) -> bool:
        """The pod object stays after its instance: keep the log's last lines first."""
        return self.pod is not None and self.reason in _POD_STAYS

    @property
    def after_pod_end(self) -> bool:
        """The pod stays, and the same plan patches its terminal status before this: sent
        only if that patch succeeded. The pod's end must be on the pod before its instance
        goes, or a writer that lost our rows may take it for a new pod and run its work
        again; the stopped instance waits for a later tick's patch (architecture §4)."""
        return self.pod is not None and self.reason in _ENDS_THE_POD

    def shown(self) -> tuple[str, str]:
        return str(self.pod) if self.pod is not None else self.instance_id, self.detail


@dataclass(frozen=True)
class CreateCluster:
    """Create one Instant Cluster for a gang, trying the ranked candidates in order
    (docs/architecture.md §3, "Cloud resources"; §4's create protocol).

    `row` is the intent (state creating) committed before the first call; the members
    are found by the gang's tag if the answer is lost.
    """

    pods: tuple[PodRef, ...]
    row: ClusterRow
    candidates: tuple[ClusterRequest, ...]

    @property
    def subject(self) -> str:
        """What it acts on, for the log and the tick's errors."""
        return f"the cluster of Job {self.row.namespace}/{self.row.job_name}"

    def shown(self) -> tuple[str, str]:
        return (
            f"{self.row.namespace}/{self.row.job_name}",
            ", ".join(f"{c.pod_count}x{c.gpu_type_id}" for c in self.candidates),
        )


@dataclass(frozen=True)
class DeleteCluster:
    """DELETE one of our clusters, with every member. `row` (if any) is saved as
    deleting first. `pods` are the gang's pods whose end the same plan patches before
    this (each is told in an Event): the DELETE is sent only if none of those patches
    failed, so that the end is on the pods before the cluster goes (architecture §4).
    `logs`: each pod that stays, with the member whose last lines are kept for it first
    and the pod's Job."""

    cluster_id: str
    reason: TerminateReason
    detail: str
    row: ClusterRow | None = None
    pods: tuple[PodRef, ...] = ()
    logs: tuple[tuple[PodRef, str, str], ...] = ()

    @property
    def subject(self) -> str:
        """What it acts on, for the log and the tick's errors."""
        return f"cluster {self.cluster_id}"

    def shown(self) -> tuple[str, str]:
        return self.cluster_id, self.detail


@dataclass(frozen=True)
class SaveClusterRow:
    row: ClusterRow

    @property
    def subject(self) -> str:
        """What it acts on, for the log and the tick's errors."""
        return f"the cluster of Job {self.row.namespace}/{self.row.job_name}"

    def shown(self) -> tuple[str, str]:
        return f"{self.row.namespace}/{self.row.job_name}", self.row.state.value


@dataclass(frozen=True)
class DeleteClusterRow:
    """Forget a gang's record: its cluster is gone and so are its pods."""

    gang: str

    def shown(self) -> tuple[str, str]:
        return self.gang, ""


@dataclass(frozen=True)
class RestoreTags:
    """PATCH our tags back onto an instance we own by row or annotation (env sent whole)."""

    instance_id: str
    env: dict[str, str] = field(repr=False)
    pod: PodRef | None = None

    def shown(self) -> tuple[str, str]:
        return str(self.pod) if self.pod is not None else self.instance_id, "owner tags lost"


@dataclass(frozen=True)
class PatchStatus:
    pod: PodRef
    status: dict[str, Any]
    row: MappingRow | None
    """The row with the new status fingerprint, saved once the patch succeeded (None for
    a pod we never run, which has no row)."""
    annotations: dict[str, str | None] = field(default_factory=dict)
    """Annotations to write in the same request: the pods/status subresource takes
    metadata changes too (only spec, deletionTimestamp and ownerReferences are reset)."""

    def shown(self) -> tuple[str, str]:
        return str(self.pod), str(self.status.get("phase", ""))


@dataclass(frozen=True)
class PatchMetadata:
    pod: PodRef
    annotations: dict[str, str | None]

    def shown(self) -> tuple[str, str]:
        return str(self.pod), ""


@dataclass(frozen=True)
class FinalizePod:
    """Finish a deleted pod like a kubelet once its instance is gone: write `status` (its
    terminal phase; None when it already shows one), then delete the object with grace 0
    and a UID precondition."""

    pod: PodRef
    row: MappingRow | None
    status: dict[str, Any] | None = None

    def shown(self) -> tuple[str, str]:
        return str(self.pod), ""


@dataclass(frozen=True)
class Bind:
    """Bind a pending pod to the virtual node (offload mode)."""

    pod: PodRef
    node_name: str
    trigger: OffloadTrigger
    detail: str
    """The trigger in words, for the pod's Event."""

    def shown(self) -> tuple[str, str]:
        return str(self.pod), self.detail


@dataclass(frozen=True)
class Event:
    pod: PodRef
    reason: EventReason
    message: str
    warning: bool = False

    def shown(self) -> tuple[str, str]:
        return str(self.pod), self.reason.value


# What the network-volume provisioner decides (core.resources.network_volumes), carried
# out by runtime.resources.volume_steps.
VolumeAction = (
    CreateNetworkVolume
    | CreateVolumeObject
    | ResizeNetworkVolume
    | DeleteNetworkVolume
    | DeleteVolumeObject
    | MarkClaimSelected
    | ReleaseClaim
    | ClaimEvent
)


class Action(Protocol):
    """What every action is, a built-in one or a plug-in resource's (its own frozen
    dataclasses, named nowhere here): it says what `reconciler sync --dry-run` lists of
    it. The executor routes an action of no built-in kind to the resource whose `Steps`
    name its type (`runtime/tick/resources/base.py`)."""

    def shown(self) -> tuple[str, str]:
        """(subject, detail) for `--dry-run`."""
        ...


BuiltinAction = (
    SaveRow
    | DeleteRow
    | Create
    | EnsureRegistryAuth
    | DeleteRegistryAuth
    | VolumeAction
    | Adopt
    | Terminate
    | RestoreTags
    | PatchStatus
    | PatchMetadata
    | FinalizePod
    | Bind
    | Event
    | CreateCluster
    | DeleteCluster
    | SaveClusterRow
    | DeleteClusterRow
)
"""The actions the built-in resources and the planner know by type (`match` on it is
exhaustive for them); an `Action` may be of another kind."""
