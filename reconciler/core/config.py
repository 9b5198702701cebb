"""Typed settings: one frozen dataclass, filled by the CLI from flags or RECONCILER_* vars.

The pure core (planner, translation, GPU ranking) receives a `Settings` value and never
reads the environment itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from reconciler.core.domain import Cloud

DEFAULT_NODE_NAME = "virtual-runpod"
DEFAULT_DATABASE_URL = "sqlite:///reconciler.db"
DEFAULT_RUNPOD_URL = "https://api.runpod.io"


@dataclass(frozen=True)
class Settings:
    node_name: str = DEFAULT_NODE_NAME
    """Name of the virtual node whose pods we run on RunPod."""

    cluster_id: str = ""
    """First half of the owner id; empty means the UID of the kube-system namespace."""

    max_gpu_price: float = 2.0
    """USD per hour for a whole pod when it has no runpod.io/max-price annotation."""

    cloud: Cloud = Cloud.SECURE
    """Cloud tier used when a pod has no runpod.io/cloud-type annotation."""

    datacenter_ids: tuple[str, ...] = ()
    """Data centers we may place instances in; empty allows all."""

    container_disk_gb: int = 50
    """Container disk for pods without runpod.io/container-disk-gb."""

    max_instances: int = 100
    """Owned instances (live or being created) never exceed this."""

    max_hourly_spend: float = 200.0
    """Sum of the owned instances' cost per hour never exceeds this (USD)."""

    max_creates_per_tick: int = 50
    """Upper bound on create calls in one tick, before the rate budget bounds it further."""

    max_pending_time: float = 15 * 60
    """Seconds a pod may wait for an instance (capacity, bad annotation) before Failed."""

    max_pending_time_before_offload: float = 0
    """Seconds a managed pod may stay unschedulable before it is bound to the virtual node."""

    pending_threshold: int = 0
    """Offload the oldest unschedulable managed pods beyond this many; 0 turns it off."""

    create_grace_time: float = 120
    """Seconds to wait for an in-doubt create to show in the list before creating again."""

    orphan_grace_time: float = 300
    """Seconds an owned instance without a pod must have existed before it is terminated."""

    catalog_ttl: float = 300
    """Seconds the GPU catalog is cached between fetches."""

    exit_code_timeout: float = 600
    """Seconds a stopped batch instance's exit code may stay unreadable; then the instance
    is terminated anyway and its pod fails with ExitCodeUnknown."""

    cost_history_days: int = 31
    """Days mapping rows and billing records are kept after their pod ended, for
    `reconciler cost` and the leak audit."""

    node_gpus: int = 1000
    """nvidia.com/gpu capacity the virtual node advertises."""

    node_pods: int = 1000
    node_cpu: str = "4k"
    node_memory: str = "16Ti"

    kubelet_address: str = ""
    """The node's InternalIP: where the reconciler's own pod can be reached (its pod IP),
    and so the kubelet endpoint. Empty: the node lists only its name as a Hostname address."""

    kubelet_port: int = 10250
    """Port of the kubelet endpoint (`kubectl logs`), advertised in the node's
    status.daemonEndpoints; 0 serves and advertises none."""

    kubelet_tls_secret: str = ""
    """`[namespace/]name` of a kubernetes.io/tls Secret to serve with; empty: self-signed."""

    kubelet_idle_timeout: float = 30
    """Seconds a kubelet-endpoint connection may stay silent while its TLS handshake or
    its request's headers are due (or between two requests); then it is closed, before
    anyone is authenticated."""

    kubelet_max_connections: int = 200
    """Connections the kubelet endpoint holds at once; one more is closed at once."""

    kubelet_max_follows_per_client: int = 50
    """`kubectl logs -f` the kubelet endpoint serves at once to one authenticated caller."""

    log_read_share: float = 0.2
    """Share of RunPod's request quota (each window of it) that the kubelet endpoint's log
    reads may spend; a read beyond it is refused with a sentence, a follower's resume
    waits. The reconciler's own requests keep the rest."""

    log_keep_lines: int = 1000
    """Lines of a pod's log kept in the store when its instance ends."""

    log_keep_bytes: int = 1 << 20
    """Most bytes of a pod's log kept in the store when its instance ends."""

    tick_deadline: float = 10
    """Seconds after a tick's start when no more creates start and RunPod requests stop
    (also the longest any one request may take); the rest waits for the next tick."""

    @property
    def owner_id(self) -> str:
        return f"{self.cluster_id}/{self.node_name}"


DAY = 24 * 3600.0
YEAR = 365 * DAY
# No machine RunPod rents has a disk this large; above it a value is a typo. The contract
# itself sets only the floors (container disk 1 GB, persistent volume 10 GB).
MAX_DISK_GB = 10_000

# Field -> (lowest, highest, what the number is). Every value must also be finite: a
# NaN compares false with everything, so it would pass any check written as `x < limit`.
LIMITS: dict[str, tuple[float, float, str]] = {
    "max_gpu_price": (0.01, 10_000, "a price in USD per hour"),
    "container_disk_gb": (1, MAX_DISK_GB, "a disk size in GB"),
    "max_instances": (0, 100_000, "a number of instances"),
    "max_hourly_spend": (0, 1_000_000, "a spend in USD per hour"),
    "max_creates_per_tick": (0, 1000, "a number of creates"),
    "max_pending_time": (0, YEAR, "a number of seconds"),
    "max_pending_time_before_offload": (0, YEAR, "a number of seconds"),
    "pending_threshold": (0, 100_000, "a number of pods"),
    "create_grace_time": (0, DAY, "a number of seconds"),
    "orphan_grace_time": (0, YEAR, "a number of seconds"),
    "catalog_ttl": (0, DAY, "a number of seconds"),
    "node_gpus": (0, 1_000_000_000, "a number of GPUs"),
    "node_pods": (0, 1_000_000_000, "a number of pods"),
    "tick_deadline": (1, 3600, "a number of seconds"),
    "exit_code_timeout": (1, DAY, "a number of seconds"),
    "cost_history_days": (1, 3650, "a number of days"),
    "kubelet_idle_timeout": (1, 3600, "a number of seconds"),
    "kubelet_max_connections": (1, 100_000, "a number of connections"),
    "kubelet_max_follows_per_client": (1, 100_000, "a number of follows"),
    "log_read_share": (0.01, 0.5, "a share of the quota"),
}


def out_of_range(value: float, limits: tuple[float, float, str]) -> str | None:
    """Why `value` breaks `limits`, or None when it is finite and within them."""
    low, high, what = limits
    if not math.isfinite(value) or not low <= value <= high:
        return f"{value!r} is not {what} from {_number(low)} to {_number(high)}"
    return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# A Node's name is a DNS-1123 subdomain (at most 253 characters); the node's writer Lease
# is named `<node>-writer` (runtime/claim.py), so the node's name must leave it room.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_NODE_NAME = 253 - len("-writer")


def node_name_problem(name: str) -> str | None:
    """Why `name` cannot name the virtual node (and its Leases), or None."""
    if len(name) > MAX_NODE_NAME:
        return f"{len(name)} characters; at most {MAX_NODE_NAME}, so its writer Lease's name fits"
    if not _DNS_SUBDOMAIN.fullmatch(name):
        return (
            f"{name!r} is not a DNS subdomain (lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit)"
        )
    return None


def settings_problems(settings: Settings) -> Iterator[tuple[str, str]]:
    """(field, why) for every setting out of its range."""
    problem = node_name_problem(settings.node_name)
    if problem is not None:
        yield "node_name", problem
    for name, limits in LIMITS.items():
        problem = out_of_range(getattr(settings, name), limits)
        if problem is not None:
            yield name, problem
