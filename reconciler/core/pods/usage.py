"""What the virtual node's pods use, for `kubectl top` (metrics-server) and the GPU gauge.

RunPod's list gives, per running instance, `runtime.cpu.util` and `runtime.memory.util`
as 0-100 figures, and per GPU `runtime.gpus[].util`. For a CPU instance the base is
known: its vCPUs (`cpu.vcpuCount`) and RAM (`cpu.memory`, GB). So its CPU use is
util x vCPUs cores and its working set util x RAM bytes, exact in the contract's terms.
A GPU instance's CPU and memory figures have no base the contract states: they are left
out (metrics-server then shows no such pod) rather than invented; its GPU utilization is
reported instead.

metrics-server reads CPU as a counter of core-seconds and takes the rate between two
scrapes, so the meter integrates the rate seen at each tick over the time to the next.
The counters live in the serving process only, and are rebuilt from the list: an
instance first seen (after a restart too) starts at rate x uptime, as if it had run at
today's rate since its container started; a container that restarted starts again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.domain import Instance, InstanceStatus, KubeObject
from reconciler.core.pods import podinfo
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.errors import TranslationError

GB = 10**9
"""RunPod's GB, as in the CPU sizing (core/translate/cpus.py)."""
_SAME_START = timedelta(seconds=2)

Owned = Mapping[str, Sequence[Instance]]
"""Our instances by the UID of their pod (`Ownership.owned`)."""


@dataclass(frozen=True)
class ContainerUsage:
    namespace: str
    pod: str
    pod_uid: str
    container: str
    started_at: datetime
    cpu_seconds: float
    """Core-seconds used since `started_at` (a counter)."""
    memory_bytes: int


@dataclass(frozen=True)
class GpuUtilization:
    namespace: str
    pod: str
    gpu: int
    """The GPU's index on its instance, in RunPod's order."""
    ratio: float
    """0-1."""


@dataclass(frozen=True)
class _Counter:
    started_at: datetime
    value: float
    rate: float
    """Cores in use when `at` was seen; the counter grows at it until the next tick."""
    at: datetime
    memory_bytes: int
    usage: tuple[str, str, str, str]
    """Namespace, pod name and UID, container name."""

    def at_time(self, now: datetime) -> float:
        return self.value + self.rate * max(0.0, (now - self.at).total_seconds())


class UsageMeter:
    """The CPU counters of the node's CPU instances, kept across ticks (pure: time in)."""

    def __init__(self) -> None:
        self._counters: dict[str, _Counter] = {}

    def observe(self, pods: Iterable[KubeObject], owned: Owned, now: datetime) -> None:
        """Read the tick's list: `owned` is our instances by pod UID."""
        counters: dict[str, _Counter] = {}
        # From the instances' side: a GPU instance gives no base for CPU figures, and a
        # node of GPU pods then never reads its pods' JSON (scattered, so slow to walk).
        cpu: dict[str, Instance] = {}
        for uid, instances in owned.items():
            instance = _running(instances)
            if instance is not None and instance.cpu_flavor_id:
                cpu[uid] = instance
        for pod in pods if cpu else ():
            instance = cpu.get(podinfo.uid(pod))
            if instance is None:
                continue
            counter = _measure(pod, instance, now)
            if counter is None:
                continue
            before = self._counters.get(instance.id)
            # Uptime is whole seconds: a start read at two ticks may differ by one.
            if before is not None and abs(before.started_at - counter.started_at) <= _SAME_START:
                counter = _Counter(
                    before.started_at,
                    before.at_time(now),
                    counter.rate,
                    now,
                    counter.memory_bytes,
                    counter.usage,
                )
            counters[instance.id] = counter
        self._counters = counters

    def usage(self, now: datetime) -> list[ContainerUsage]:
        return [
            ContainerUsage(*c.usage, c.started_at, c.at_time(now), c.memory_bytes)
            for c in self._counters.values()
        ]


def _running(instances: Sequence[Instance]) -> Instance | None:
    """The pod's running instance (of duplicates being healed, the first listed)."""
    for instance in instances:  # a loop, not next(): this runs per pod, per tick
        if instance.status is InstanceStatus.RUNNING:
            return instance
    return None


def _measure(pod: KubeObject, instance: Instance, now: datetime) -> _Counter | None:
    """A counter started from this observation; None when the instance gives no figures."""
    runtime = instance.runtime
    if (
        instance.status is not InstanceStatus.RUNNING
        or runtime is None
        or runtime.cpu_percent is None
        or runtime.memory_percent is None
        or not instance.cpu_flavor_id  # a GPU instance: no base for its figures
    ):
        return None
    try:
        container = str(choose_container(pod).get("name") or "")
    except TranslationError:
        return None
    rate = runtime.cpu_percent / 100 * instance.vcpu_count
    started = now - timedelta(seconds=runtime.uptime_seconds)
    memory = int(runtime.memory_percent / 100 * instance.memory_gb * GB)
    ref = pod["metadata"]
    names = (str(ref.get("namespace") or "default"), str(ref["name"]), str(ref["uid"]), container)
    return _Counter(started, rate * runtime.uptime_seconds, rate, now, memory, names)


def gpu_utilization(pods: Iterable[KubeObject], owned: Owned) -> list[GpuUtilization]:
    """Each running GPU instance's per-GPU utilization, by its pod."""
    found = []
    for pod in pods:
        instance = _running(owned.get(podinfo.uid(pod), ()))
        if instance is None or instance.runtime is None or not instance.gpu_type_id:
            continue
        ref = pod["metadata"]
        for index, percent in enumerate(instance.runtime.gpu_percents):
            namespace = str(ref.get("namespace") or "default")
            found.append(GpuUtilization(namespace, str(ref["name"]), index, percent / 100))
    return found
