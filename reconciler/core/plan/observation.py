"""What one plan is given: the two worlds as the engine observed them (docs/architecture.md §2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict, TypeVar

from reconciler.core.capacity.starts import FailedStart
from reconciler.core.capacity.stock import Place
from reconciler.core.cluster_row import ClusterRow
from reconciler.core.domain import (
    BillingRecord,
    CpuFlavor,
    GpuType,
    Instance,
    KubeObject,
    RunPodVolume,
)
from reconciler.core.mapping import MappingRow
from reconciler.core.money.charges import PriceDifference
from reconciler.core.money.namespace_caps import NamespaceCaps
from reconciler.core.pods.offload import PendingPod
from reconciler.core.pods.ownership import Ownership
from reconciler.core.translate.claims import ClaimMount
from reconciler.core.translate.env import EnvSources
from reconciler.core.translate.errors import TranslationError


@dataclass(frozen=True)
class CreateInputs:
    """What a create needs from Kubernetes besides the pod, fetched only for such pods."""

    job: KubeObject | None = None
    sources: EnvSources = field(default_factory=lambda: EnvSources({}, {}))
    registry_auth_id: str | None = None
    pull_secret: tuple[str, str, str] | None = field(default=None, repr=False)
    claim: ClaimMount | None = None
    """The network volume the pod's claims give it (`core.translate.claims`)."""
    pull_credentials: tuple[tuple[str, str, str], ...] = field(default=(), repr=False)
    """Every login the pod's imagePullSecrets hold (`pull_secrets.all_credentials`)."""
    claim_uids: frozenset[str] = frozenset()
    """The UIDs of the pod's namespace's claims, read only when the pod names a network
    volume by id: the only volumes it may name are those made for one of them."""
    error: TranslationError | None = None


Slot = TypeVar("Slot")


@dataclass(frozen=True)
class Observation:
    pods: Sequence[KubeObject]
    instances: Sequence[Instance]
    rows: Sequence[MappingRow]
    catalog: Sequence[GpuType] = ()
    cpu_catalog: Sequence[CpuFlavor] = ()
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
    """Where RunPod lately refused creates for want of stock (`reconciler.core.capacity.stock`)."""
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
    network_volumes: Sequence[RunPodVolume] | None = None
    """The account's network volumes, listed only on a tick that creates a pod mounting
    one; None when not listed."""
    ownership: Ownership | None = None
    """Which instances are ours, as the engine worked it out from these pods, rows and
    instances; None when built without it (`ownership_of` then works it out)."""
    gang_pods: Sequence[KubeObject] = ()
    """The node's pods that ask for an Instant Cluster (`core.resources.clusters`): not
    in `pods`."""
    foreign_gang_pods: Sequence[KubeObject] = ()
    """Gang pods whose controller ownerReference names no Job of their namespace: in no
    gang (`runtime/tick/resources/gang_jobs.py`), not in `gang_pods`."""
    gang_jobs_unread: frozenset[str] = frozenset()
    """Job UIDs of gang pods whose Job could not be read this tick: no cluster of such a
    Job is collected on it."""
    members: Sequence[Instance] = ()
    """Instant Cluster members in the list, anyone's: not in `instances`."""
    clusters: Sequence[ClusterRow] = ()
    """The gangs' cluster rows."""
    gang_inputs: Mapping[str, CreateInputs] = field(default_factory=dict)
    """By Job UID: the Job and the env sources of a gang with no cluster yet (read only
    for such gangs)."""
    gang_results: Mapping[str, int | None] = field(default_factory=dict)
    """By gang key: rank 0's exit code read this tick (`plan.gang_end.due_reads`); None
    when its log has no marker yet."""
    gang_unread: frozenset[str] = frozenset()
    """Gang keys whose read was due but failed: their end is unknown this tick."""
    start_failures: Mapping[str, FailedStart] = field(default_factory=dict)
    """By instance id: what RunPod's system lines said of a start that cannot succeed
    (`core.capacity.starts`), for the instances starting now."""
    runpod_now: datetime | None = None
    """RunPod's clock as its list's answer gave it (the Date header): a start's timeout
    compares it with the instance's `createdAt`, never our own clock."""
    cluster_catalog: Sequence[GpuType] = ()
    """The GPU catalog with Instant Cluster stock (`product=CLUSTER`), read while a gang
    forms: its GPU type and data center are ranked on it."""
    clusters_gone: frozenset[str] = frozenset()
    """Clusters RunPod answered 404 for by id this tick: gone, proven."""
    clusters_first_listed: Mapping[str, datetime] = field(default_factory=dict)
    """By cluster id: when a list first showed a cluster of ours of which no member shows
    `createdAt` (kept in the store): its graces count from then (`core.resources.cluster_age`)."""
    standing_spend: Mapping[str | None, float] = field(default_factory=dict)
    """USD per hour of what our resources keep that the pod list does not show (network
    volumes' storage, by their claims' namespace, as the provisioner last read the PVs:
    `core.resources.storage_prices`), by namespace (None: no namespace's); each
    resource's `standing_spend` (`runtime/tick/resources/base.py`), summed."""
    slots: Mapping[type[Any], Any] = field(default_factory=dict)
    """What each plug-in resource read for its own plan, by the type it read it as:
    `slot(kind)` gives it back typed (`runtime/tick/resources/__init__.py`, the recipe)."""

    def slot(self, kind: type[Slot]) -> Slot | None:
        """The resource's own reads of this tick, as it put them (None: none)."""
        found = self.slots.get(kind)
        return found if isinstance(found, kind) else None


class Observed(TypedDict, total=False):
    """The `Observation` fields a tick's resources and chores read, each filled by the one
    that reads it (`Sighting.found` in `runtime/tick/resources/base.py`), typed as the
    fields themselves; the engine adds the lists."""

    instances: Sequence[Instance]
    rows: Sequence[MappingRow]
    catalog: Sequence[GpuType]
    cpu_catalog: Sequence[CpuFlavor]
    create_inputs: Mapping[str, CreateInputs]
    exit_codes: Mapping[str, int | None]
    exit_logs: Mapping[str, Sequence[str]]
    billing: Sequence[BillingRecord]
    spend: Mapping[str, float]
    price_differences: Sequence[PriceDifference]
    network_volumes: Sequence[RunPodVolume] | None
    ownership: Ownership | None
    pending: Sequence[PendingPod]
    node: KubeObject | None
    namespace_caps: Mapping[str, NamespaceCaps]
    standing_spend: Mapping[str | None, float]
    cluster_catalog: Sequence[GpuType]
    foreign_gang_pods: Sequence[KubeObject]
    gang_jobs_unread: frozenset[str]
    members: Sequence[Instance]
    clusters: Sequence[ClusterRow]
    gang_inputs: Mapping[str, CreateInputs]
    gang_results: Mapping[str, int | None]
    gang_unread: frozenset[str]
    clusters_gone: frozenset[str]
    clusters_first_listed: Mapping[str, datetime]
