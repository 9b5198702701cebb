"""What the two outside worlds look like to the pure core.

The RunPod adapter turns API answers into these values, the planner reasons over them,
and nothing here does I/O. Kubernetes objects stay plain JSON dicts (`KubeObject`): the
planner reads a handful of fields from them, and parsing thousands of pods into model
classes on every tick would cost more than the decision itself.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler import __version__
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV

KubeObject = dict[str, Any]

# Sent on every RunPod request, by the reconciler and by the batch wrapper: RunPod's
# gateway refuses some library defaults (urllib's gets a 403, error 1010).
USER_AGENT = f"runpod-reconciler/{__version__}"
# Names of the registry credentials we create start with this, then a digest of the
# owner id: credentials with any other name are not ours and never deleted.
REGISTRY_NAME_PREFIX = "runpod-reconciler-"
# The form of every id RunPod gives (pods, clusters, network volumes, registry
# credentials): letters, digits, `_` and `-`, as the contract's examples
# (`pod_abc123`, `agv6w2qcg7`, `6n2k8v4d`). Nothing else is put in a URL path: `.` or
# `..` would leave their segment (an HTTP client folds them) and address another route.
RUNPOD_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_runpod_id(value: object) -> bool:
    return isinstance(value, str) and RUNPOD_ID.fullmatch(value) is not None


class InstanceStatus(enum.StrEnum):
    PROVISIONING = "PROVISIONING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    EXITED = "EXITED"
    ERROR = "ERROR"
    TERMINATED = "TERMINATED"
    # A status this version does not know: never a crash, never acted on blindly.
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, value: object) -> InstanceStatus:
        # A lookup: cheaper than cls(value) for the 10 000 pods of a list (docs, Performance).
        return _INSTANCE_STATUSES.get(str(value).upper(), cls.UNKNOWN)


_INSTANCE_STATUSES = {status.value: status for status in InstanceStatus}


class Availability(enum.IntEnum):
    """Catalog stock level; ordered so that a higher value ranks first."""

    NONE = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3

    @classmethod
    def parse(cls, value: object) -> Availability:
        return cls.__members__.get(str(value).upper(), cls.NONE)


class Cloud(enum.StrEnum):
    SECURE = "SECURE"
    COMMUNITY = "COMMUNITY"


@dataclass(frozen=True)
class PortMapping:
    """One exposed port of a running instance, as RunPod publishes it."""

    private_port: int
    protocol: str  # "http" or "tcp"
    public_ip: str | None = None
    public_port: int | None = None


@dataclass(frozen=True)
class Runtime:
    """Present only once the container really runs."""

    uptime_seconds: int = 0
    ports: tuple[PortMapping, ...] = ()
    cpu_percent: int | None = None
    """RunPod's `runtime.cpu.util`, 0-100 of the instance's vCPUs (CPU instances) or of a
    base RunPod does not state (GPU instances)."""
    memory_percent: int | None = None
    """`runtime.memory.util`, 0-100, with the same caveat."""
    gpu_percents: tuple[int, ...] = ()
    """`runtime.gpus[].util`, 0-100 per GPU, in RunPod's order."""


@dataclass(frozen=True)
class Instance:
    """A RunPod pod. Called an instance here so that "pod" always means Kubernetes."""

    id: str
    name: str
    status: InstanceStatus
    image: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    cost_per_hr: float = 0.0
    gpu_type_id: str | None = None
    gpu_count: int = 0
    cpu_flavor_id: str | None = None
    """Set on CPU instances (RunPod's `cpu.id`), which have no GPU."""
    vcpu_count: int = 0
    memory_gb: int = 0
    """A CPU instance's RAM as RunPod states it (`cpu.memory`, GB)."""
    cloud: str | None = None
    datacenter_id: str | None = None
    ports: tuple[str, ...] = ()
    created_at: datetime | None = None
    started_at: datetime | None = None
    runtime: Runtime | None = None
    actions: tuple[str, ...] = ()
    registry_auth_id: str | None = None
    cluster_id: str | None = None
    """Set on a member of an Instant Cluster, which only its cluster's routes manage."""
    rank: int | None = None
    """A cluster member's rank (NODE_RANK); None until RunPod assigns it."""
    overlay_ip: str | None = None
    """A cluster member's address on the cluster's private network, once assigned."""
    network_volume_id: str | None = None
    """The network volume the instance mounts (`mounts.network`), if any."""
    container_disk_gb: int = 0
    """RunPod's `disk`: it bills while the instance exists."""
    volume_gb: int = 0
    """The persistent volume's size (`mounts.persistent.size`), if any."""

    @property
    def owner(self) -> str | None:
        return self.env.get(OWNER_ENV)

    @property
    def pod_uid(self) -> str | None:
        return self.env.get(POD_UID_ENV)


@dataclass(frozen=True)
class DataCenterStock:
    id: str
    availability: Availability


@dataclass(frozen=True)
class GpuType:
    """One entry of RunPod's GPU catalog. Prices are USD per GPU-hour."""

    id: str
    name: str
    memory_gb: int
    secure: bool
    community: bool
    secure_price: float
    community_price: float
    max_count_secure: int = 8
    max_count_community: int = 8
    availability: Availability = Availability.NONE
    datacenters: tuple[DataCenterStock, ...] = ()
    cuda_versions: tuple[str, ...] = ()
    """The CUDA versions (`major.minor`) its hosts report: the catalog's `cudaVersions`."""
    cuda_available: tuple[str, ...] = ()
    """Those of them with free capacity now."""

    def price(self, cloud: Cloud) -> float:
        return self.secure_price if cloud is Cloud.SECURE else self.community_price

    def offered_in(self, cloud: Cloud) -> bool:
        return self.secure if cloud is Cloud.SECURE else self.community

    def max_count(self, cloud: Cloud) -> int:
        return self.max_count_secure if cloud is Cloud.SECURE else self.max_count_community


@dataclass(frozen=True)
class CpuFlavor:
    """One entry of RunPod's CPU catalog: sold by the vCPU, RAM in proportion."""

    id: str
    name: str
    vcpu_min: int
    vcpu_max: int
    ram_gb_per_vcpu: float
    price_per_vcpu: float
    """USD per vCPU-hour on secure cloud, the only cloud the catalog prices CPUs for."""
    availability: Availability = Availability.NONE
    datacenters: tuple[DataCenterStock, ...] = ()


@dataclass(frozen=True)
class PersistentVolume:
    size_gb: int
    path: str


@dataclass(frozen=True)
class NetworkVolume:
    volume_id: str
    path: str


@dataclass(frozen=True)
class CreateRequest:
    """Everything RunPod needs to create one instance on one GPU type, or on one CPU
    flavor (`cpu_flavor_id` set, `gpu_type_id` empty).

    The adapter turns it into the v2 request body; `env` may hold Secret values and
    so is never logged or stored.
    """

    name: str
    image: str
    gpu_type_id: str
    gpu_count: int = 1
    cloud: Cloud = Cloud.SECURE
    datacenter_ids: tuple[str, ...] = ()
    args: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[str, ...] = ()
    container_disk_gb: int | None = None
    persistent_volume: PersistentVolume | None = None
    network_volume: NetworkVolume | None = None
    template_id: str | None = None
    registry_auth_id: str | None = None
    start_ssh: bool = False
    cpu_flavor_id: str | None = None
    vcpu_count: int = 0
    hourly_price: float = 0.0
    """List price of the instance in USD per hour, as the catalog gave it."""
    allowed_cuda_versions: tuple[str, ...] = ()
    """The hosts' CUDA versions the image can start on (empty: any host)."""

    @property
    def offer_id(self) -> str:
        """The catalog entry this request draws on: the CPU flavor, else the GPU type."""
        return self.cpu_flavor_id or self.gpu_type_id

    def __repr__(self) -> str:
        # env can carry Secret values: keep them out of every repr and log line.
        return (
            f"CreateRequest(name={self.name!r}, image={self.image!r}, "
            f"offer={self.offer_id!r}x{self.vcpu_count or self.gpu_count}, "
            f"cloud={self.cloud.value}, "
            f"env_keys={sorted(self.env)!r})"
        )


@dataclass(frozen=True)
class ClusterRequest:
    """One Instant Cluster of `pod_count` identical GPU pods (`POST /v2/clusters`, type
    TRAINING), each member as `member` asks for one instance, its network volume (if
    any) mounted on every member. A cluster takes no registry credential, template,
    cloud or CPU flavor: the request body leaves `member`'s out. `member.env` may hold
    Secret values: never logged or stored."""

    member: CreateRequest
    pod_count: int

    @property
    def name(self) -> str:
        return self.member.name

    @property
    def gpu_type_id(self) -> str:
        return self.member.gpu_type_id

    @property
    def gpu_count_per_pod(self) -> int:
        return self.member.gpu_count

    @property
    def hourly_price(self) -> float:
        """List price of the whole cluster in USD per hour, as the catalog gave it."""
        return round(self.member.hourly_price * self.pod_count, 6)

    def __repr__(self) -> str:
        return f"ClusterRequest(member={self.member!r}, pod_count={self.pod_count})"


@dataclass(frozen=True)
class RegistryAuth:
    """A registry credential stored at RunPod (only its id and name are readable)."""

    id: str
    name: str


@dataclass(frozen=True)
class RunPodVolume:
    """A network volume of the account, as RunPod lists it (size in RunPod's GB)."""

    id: str
    name: str
    size_gb: int
    datacenter: str
    type: str = "STANDARD"


@dataclass(frozen=True)
class ExitLog:
    """What the end of a stopped batch instance's log says: the code, if the marker is
    there, and the last lines (kept on the pod when the code cannot be read)."""

    code: int | None
    lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResourceCharge:
    """What RunPod charged for one network volume or Instant Cluster in one time bucket."""

    resource_id: str
    start: datetime
    end: datetime
    total_usd: float


@dataclass(frozen=True)
class BillingRecord:
    """What RunPod charged for one instance in one time bucket, in USD."""

    instance_id: str
    start: datetime
    end: datetime
    total_usd: float
    gpu_usd: float = 0.0
    disk_usd: float = 0.0
