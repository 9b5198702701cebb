"""Typed settings: frozen dataclasses in groups by concern, filled by the CLI from flags or
RECONCILER_* vars.

Each setting is declared once, as a field made by `setting()`: its default, its flag
(the environment variable and the setting's flat name are derived from it), its help and
what values it takes. The CLI's options (`reconciler.cli.options`) and the range checks
(`settings_problems`) are made from those declarations, so a new flag is one field here
(docs/architecture.md §1, "Adding a setting").

The pure core (planner, translation, GPU ranking) receives a `Settings` value and never
reads the environment itself.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import typing
from collections.abc import Iterator
from dataclasses import Field, dataclass, field, fields
from typing import Any

from reconciler.core.domain import Cloud
from reconciler.core.kubelet_settings import KubeletSettings
from reconciler.core.quantity import canonical_quantity
from reconciler.core.service_settings import ServiceSettings
from reconciler.core.setting import Flag, flat_name, out_of_range, seconds, setting

DEFAULT_NODE_NAME = "virtual-runpod"
DEFAULT_DATABASE_URL = "sqlite:///reconciler.db"
DEFAULT_RUNPOD_URL = "https://api.runpod.io"

DAY = 24 * 3600.0
YEAR = 365 * DAY
# No machine RunPod rents has a disk this large; above it a value is a typo. The contract
# itself sets only the floors (container disk 1 GB, persistent volume 10 GB).
MAX_DISK_GB = 10_000

# A Node's name is a DNS-1123 subdomain (at most 253 characters); the node's writer Lease
# is named `<node>-writer` (runtime/process/writer_lease.py), so the node's name must leave it room.
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


def _node_name(text: str) -> str:
    return text or DEFAULT_NODE_NAME


class PodsWithoutGpu(enum.StrEnum):
    """What a pod that asks for no GPU runs on."""

    CPU = "cpu"
    """A RunPod CPU instance sized to the pod (the default)."""
    GPU = "gpu"
    """One GPU, as before CPU instances were used."""
    REFUSE = "refuse"
    """Nothing: the pod fails with GPURequired."""


@dataclass(frozen=True)
class NodeSettings:
    """The virtual node: its name, whose cluster it serves, and the capacity it shows."""

    name: str = setting(
        DEFAULT_NODE_NAME,
        "--node-name",
        "Name of the virtual node whose pods run on RunPod.",
        parse=_node_name,
        check=node_name_problem,
    )

    cluster_id: str = setting(
        "",
        "--cluster-id",
        "Cluster half of the owner id tagged on instances (default: kube-system's UID).",
    )

    gpus: int = setting(
        1000,
        "--node-gpus",
        "nvidia.com/gpu capacity of the virtual node.",
        limits=(0, 1_000_000_000, "a number of GPUs"),
    )

    pods: int = setting(
        1000,
        "--node-pods",
        "Pod capacity of the virtual node.",
        limits=(0, 1_000_000_000, "a number of pods"),
    )

    cpu: str = setting(
        "4k",
        "--node-cpu",
        "CPU capacity of the virtual node: any Kubernetes quantity, written in the API "
        "server's canonical form (4k, not 4000).",
        parse=canonical_quantity,
    )

    memory: str = setting(
        "16Ti",
        "--node-memory",
        "Memory capacity of the virtual node: any Kubernetes quantity, written in the API "
        "server's canonical form.",
        parse=canonical_quantity,
    )


@dataclass(frozen=True)
class PlacementSettings:
    """Where and on what a pod runs, and when a pending pod is offloaded."""

    cloud: Cloud = setting(
        Cloud.SECURE, "--cloud-type", "Cloud tier for pods without runpod.io/cloud-type."
    )

    pods_without_gpu: PodsWithoutGpu = setting(
        PodsWithoutGpu.CPU,
        "--pods-without-gpu",
        "What a pod asking for no GPU runs on: a CPU instance sized to it, one GPU (the "
        "behaviour before CPU instances), or nothing (it fails with GPURequired).",
    )
    """For a pod without an nvidia.com/gpu resource or GPU annotation."""

    datacenter_ids: tuple[str, ...] = setting(
        (),
        "--datacenter-ids",
        "Comma-separated data centers instances may use (empty: any); one where the GPU "
        "catalog offers no GPU type is named in a warning.",
    )

    registry_auth_ids: tuple[str, ...] = setting(
        (), "--registry-auth-ids", "Registry credential ids any pod may name (comma-separated)."
    )
    """Besides these, a pod's runpod.io/container-registry-auth-id names only a credential
    made from its own imagePullSecrets (`core.resources.registries.Naming`)."""

    container_disk_gb: int = setting(
        50,
        "--container-disk-gb",
        "Default container disk in GB.",
        limits=(1, MAX_DISK_GB, "a disk size in GB"),
    )

    max_pending_time_before_offload: float = setting(
        0,
        "--max-pending-time-before-offload",
        "Seconds a managed pod may be unschedulable before it is offloaded to RunPod.",
        limits=seconds(0, YEAR),
    )

    pending_threshold: int = setting(
        0,
        "--pending-threshold",
        "Offload the oldest unschedulable managed pods beyond this many (0: off).",
        limits=(0, 100_000, "a number of pods"),
    )


@dataclass(frozen=True)
class CapsSettings:
    """Money and counts: what a pod may cost, what all may cost, how much is kept."""

    max_gpu_price: float = setting(
        2.0,
        "--max-gpu-price",
        "USD/h a pod may cost without a runpod.io/max-price annotation.",
        limits=(0.01, 10_000, "a price in USD per hour"),
    )

    max_instances: int = setting(
        100,
        "--max-instances",
        "Most owned instances at once (an Instant Cluster's members count one each).",
        limits=(0, 100_000, "a number of instances"),
    )
    """Owned instances (live or being created) never exceed this."""

    max_hourly_spend: float = setting(
        200.0,
        "--max-hourly-spend",
        "Most USD/h all owned instances, Instant Cluster members and network volumes' "
        "storage cost, at list price.",
        limits=(0, 1_000_000, "a spend in USD per hour"),
    )

    max_creates_per_tick: int = setting(
        50,
        "--max-creates-per-tick",
        "Most create calls in one tick; also bounded by our share of the remaining RunPod "
        "rate budget.",
        limits=(0, 1000, "a number of creates"),
    )

    cost_history_days: int = setting(
        31,
        "--cost-history",
        "Days finished pods' mappings and billing records are kept, for `reconciler cost` "
        "and the leak audit.",
        limits=(1, 3650, "a number of days"),
    )

    runpod_max_answer_mib: int = setting(
        64,
        "--runpod-max-answer-mib",
        "Largest answer read from RunPod, in MiB: a larger one is refused, never held whole.",
        limits=(1, 4096, "a size in MiB"),
    )


@dataclass(frozen=True)
class TimingSettings:
    """How long things may take: a pending pod, a create, a tick, a catalog's copy."""

    max_pending_time: float = setting(
        15 * 60,
        "--max-pending-time",
        "Seconds a pod may wait for an instance before it fails.",
        limits=seconds(0, YEAR),
    )
    """Capacity, budget, a bad annotation: then the pod is Failed."""

    create_grace_time: float = setting(
        120,
        "--create-grace-time",
        "Seconds an in-doubt create may take to appear before creating again.",
        limits=seconds(0, DAY),
    )

    orphan_grace_time: float = setting(
        300,
        "--orphan-grace-time",
        "Seconds an instance without a pod must be old before it is terminated.",
        limits=seconds(0, YEAR),
    )

    start_timeout: float = setting(  # ten minutes: docs/guides/starting.md says why
        600,
        "--start-timeout",
        "Seconds an instance may take to run after its create before it is replaced.",
        limits=seconds(0, DAY),
    )

    catalog_ttl: float = setting(
        300,
        "--catalog-ttl",
        "Seconds the GPU and CPU catalogs are cached.",
        limits=seconds(0, DAY),
    )

    exit_code_timeout: float = setting(
        600,
        "--exit-code-timeout",
        "Seconds a stopped batch instance's exit code may stay unreadable before the "
        "instance is terminated anyway and its pod fails with ExitCodeUnknown.",
        limits=seconds(1, DAY),
    )

    gang_result_interval: float = setting(
        60,
        "--gang-result-interval",
        "Seconds between two reads of a running gang's rank 0 log for its exit code, the "
        "gang's result (one RunPod request each; 0: never read, so only deadlines and "
        "deleting the Job end a gang).",
        limits=seconds(0, DAY),
    )

    tick_deadline: float = setting(
        10,
        "--tick-deadline",
        "Seconds a tick may take: later creates wait for the next tick, and no RunPod "
        "request runs past it.",
        limits=seconds(1, 3600),
    )


@dataclass(frozen=True)
class LogSettings:
    """Pods' logs: the share of RunPod's quota their reads may spend, what is kept."""

    read_share: float = setting(
        0.2,
        "--log-read-share",
        "Share of RunPod's request quota that log reads (kubectl logs) may spend; the "
        "reconciler keeps the rest.",
        limits=(0.01, 0.5, "a share of the quota"),
    )
    """Of each quota window; a read beyond it is refused with a sentence, a follower's
    resume waits (`reconciler.core.logs.quota_share`)."""

    keep_lines: int = setting(
        1000,
        "--log-keep-lines",
        "Lines of a pod's log kept after its instance ends.",
        limits=(0, 5000, "a number of lines"),
    )
    """Kept in the store."""

    keep_bytes: int = setting(
        1 << 20,
        "--log-keep-bytes",
        "Most bytes of a pod's log kept after its instance ends.",
        limits=(0, math.inf, "a number of bytes"),
    )


@dataclass(frozen=True)
class SshSettings:
    """SSH to instances (exec, cp, port-forward): the reconciler's key and the way there."""

    key_file: str = setting(
        "",
        "--ssh-key-file",
        "The reconciler's own SSH private key (made there if missing): instances get its "
        "public key and sshd, for kubectl exec, cp and port-forward (empty: no SSH).",
    )
    """OpenSSH ed25519. Instances are created with `startSsh`, its public key in
    `PUBLIC_KEY` and 22/tcp published."""

    key_secret: str = setting(
        "",
        "--ssh-key-secret",
        "A Secret in the reconciler's namespace holding its SSH key (made there if "
        "missing), used when --ssh-key-file is not given (empty: no SSH).",
    )
    """Type kubernetes.io/ssh-auth, the OpenSSH ed25519 key in `ssh-privatekey`; the
    deploy manifests and the chart set it and grant `create` on Secrets there."""

    proxy_command: str = setting(
        "",
        "--ssh-proxy-command",
        "How to reach an instance's sshd where this cluster cannot route to RunPod's "
        "public IPs: an OpenSSH ProxyCommand, %h and %p its host and port (for example "
        "'ssh -W %h:%p bastion'; empty: connect directly).",
    )
    """Run once per SSH connection; its stdin and stdout carry the connection."""

    public_key: str = field(default="", metadata={"name": "ssh_public_key"})
    """The public key of the key file or Secret as an authorized_keys line, read at start
    (not a flag; `ssh_public_key` in `Settings.of`)."""


@dataclass(frozen=True)
class Settings:
    """Every setting, in groups by concern (`settings.timing.create_grace_time`,
    `settings.kubelet.port`). The CLI gives them flat, by their flag's name
    (`Settings.of(kubelet_port=...)`): that name is unique across the groups, and a field
    inside its group does not repeat the group."""

    node: NodeSettings = field(default_factory=NodeSettings)
    placement: PlacementSettings = field(default_factory=PlacementSettings)
    caps: CapsSettings = field(default_factory=CapsSettings)
    timing: TimingSettings = field(default_factory=TimingSettings)
    kubelet: KubeletSettings = field(default_factory=KubeletSettings)
    logs: LogSettings = field(default_factory=LogSettings)
    ssh: SshSettings = field(default_factory=SshSettings)
    services: ServiceSettings = field(default_factory=ServiceSettings)

    @property
    def owner_id(self) -> str:
        return f"{self.node.cluster_id}/{self.node.name}"

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """Settings from flat values by setting name (`max_instances=5`), each put in its
        group; the others keep their defaults."""
        return cls().with_values(**values)

    def with_values(self, **values: Any) -> Settings:
        """These settings with some values changed, by setting name."""
        unknown = values.keys() - PLACE_OF.keys()
        if unknown:
            raise TypeError(f"no such setting: {', '.join(sorted(unknown))}")
        changed = {}
        for group in {PLACE_OF[name][0] for name in values}:
            mine = {PLACE_OF[k][1]: v for k, v in values.items() if PLACE_OF[k][0] == group}
            changed[group] = dataclasses.replace(getattr(self, group), **mine)
        return dataclasses.replace(self, **changed)


def settings_fields() -> Iterator[tuple[Field[Any], Flag]]:
    """Every setting's field with its flag, group by group in declaration order. The
    setting's flat name is its flag's (`flag.name`), not the field's."""
    for kind in _GROUPS.values():
        for item in fields(kind):
            if "flag" in item.metadata:  # a value derived at start has none
                yield item, item.metadata["flag"]


_GROUPS: dict[str, Any] = {item.name: item.default_factory for item in fields(Settings)}
"""The groups, by their attribute on `Settings`, in the order of the flags."""


PLACE_OF: dict[str, tuple[str, str]] = {
    flat_name(item): (group, item.name) for group, kind in _GROUPS.items() for item in fields(kind)
}
"""(group, field) of each setting, by its flat name."""


def setting_types() -> dict[str, Any]:
    """Each setting's type, by its flat name."""
    hints = {group: typing.get_type_hints(kind) for group, kind in _GROUPS.items()}
    return {name: hints[group][attr] for name, (group, attr) in PLACE_OF.items()}


def setting_value(settings: Settings, name: str) -> Any:
    """A setting's value by its flat name."""
    group, attr = PLACE_OF[name]
    return getattr(getattr(settings, group), attr)


def settings_problems(settings: Settings) -> Iterator[tuple[str, str]]:
    """(flat name, why) for every setting that cannot work: out of its range, or breaking
    its own rule."""
    for _, flag in settings_fields():
        value = setting_value(settings, flag.name)
        problem = out_of_range(value, flag.limits) if flag.limits is not None else None
        if problem is None and flag.check is not None:
            problem = flag.check(value)
        if problem is not None:
            yield flag.name, problem
