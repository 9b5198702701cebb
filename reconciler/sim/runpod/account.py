"""The simulated RunPod account: the state every route reads and writes, and its settings.

One `Account` lives as long as its simulator; `reset()` empties it in place, so the
route classes and open log streams that hold it see the reset at once. All of it is
guarded by `lock` (re-entrant: a test control may call another); `log_written` is
notified when a pod's log or life changes, so open log streams send at once.
"""

from __future__ import annotations

import random
import string
import threading
from datetime import datetime, timedelta
from typing import Any

from reconciler.sim.clock import SimClock
from reconciler.sim.runpod import billing
from reconciler.sim.runpod.catalog import DEFAULT_CPU_FLAVORS, Catalog, cuda_key
from reconciler.sim.runpod.clusters import SimCluster
from reconciler.sim.runpod.pods import SimPod
from reconciler.sim.runpod.validate import Problem
from reconciler.sim.runpod.volumes import Volumes

_ID_ALPHABET = string.ascii_lowercase + string.digits


class Account:
    def __init__(
        self,
        clock: SimClock,
        gpu_types: list[dict[str, Any]],
        boot: tuple[timedelta, timedelta],
    ) -> None:
        self.clock = clock
        self._gpu_types = gpu_types
        self.boot = boot
        """How long a new pod provisions, then starts (before its image's pull time)."""
        self.lock = threading.RLock()
        self.log_written = threading.Condition(self.lock)
        self.stopping = threading.Event()
        self.volumes = Volumes()
        self.reset()

    def reset(self) -> None:
        """Forget pods, clusters, volumes, registries and settings; the clock keeps its time."""
        with self.lock:
            self.catalog = Catalog(self._gpu_types, DEFAULT_CPU_FLAVORS)
            self.volumes.close()
            self.volumes = Volumes()
            self.pods: dict[str, SimPod] = {}
            self.clusters: dict[str, SimCluster] = {}
            self.registries: dict[str, str] = {}
            self.ledgers: dict[str, billing.PodLedger] = {}
            self.terminated: dict[str, dict[str, Any]] = {}
            """Deleted pods as their id keeps answering: TERMINATED."""
            self.templates: dict[str, dict[str, Any]] = {}
            self.listing_lag = timedelta()
            self.balance: float | None = None
            self.pull_seconds: dict[str, float] = {}
            self.image_cuda: dict[str, str] = {}
            """The CUDA version each image requires of its host (NVIDIA_REQUIRE_CUDA)."""
            self.unpullable: dict[str, str] = {}
            """Images no host can pull, with the registry's refusal."""
            self.host_faults: dict[tuple[str, str], str] = {}
            """(GPU type, data center) → how its hosts fail a start: `gpu` or `stuck`."""
            self.just_created: SimPod | SimCluster | None = None
            """The pod or cluster the request being answered made (for its log entry)."""
            self._random = random.Random(0)
            self._issued: set[str] = set()
            self._next_public_port = 30000
            self._machines = 0  # each pod on a machine of its own, with its own public IP

    # What the routes share

    def pod(self, instance_id: str) -> SimPod:
        """The pod, for a test control: a KeyError (the admin routes' 404) when unknown."""
        try:
            return self.pods[instance_id]
        except KeyError:
            raise KeyError(f"pod {instance_id}") from None

    def served_pod(self, instance_id: str) -> SimPod:
        """The pod an API route names: 404 when there is none."""
        pod = self.pods.get(instance_id)
        if pod is None:
            raise Problem(404, "pod not found")
        return pod

    def new_id(self, prefix: str = "", length: int = 14) -> str:
        """An id never given before in this account (RunPod's ids are not reused): not
        a live pod's only, but a deleted one's, whose ledger and TERMINATED record stay,
        a cluster's or a credential's."""
        while True:
            candidate = prefix + "".join(self._random.choices(_ID_ALPHABET, k=14))[:length]
            if candidate not in self._issued:
                self._issued.add(candidate)
                return candidate

    def public_ip(self) -> str:
        self._machines += 1
        return f"203.0.113.{(self._machines - 1) % 254 + 1}"

    def public_port(self) -> int:
        self._next_public_port += 1
        return self._next_public_port

    def listed_from(self, now: datetime) -> datetime:
        """When a resource made now first shows in its list."""
        return now + self.listing_lag

    def release(self, pod: SimPod) -> None:
        if pod.holds_capacity:
            product = "CLUSTER" if pod.membership is not None else "POD"
            self.catalog.give_back(pod.gpu_id, pod.datacenter_id, pod.gpu_count, product)
            pod.holds_capacity = False

    def check_payable(self, hourly: float, registry: str | None) -> None:
        if registry is not None and registry not in self.registries:
            # The contract's 404: "not found or not accessible to the caller".
            raise Problem(404, f"registry credential {registry} not found")
        if self.balance is not None and self.balance < hourly:
            raise Problem(402, f"insufficient balance for a pod costing ${hourly:.2f}/h")

    # The account's settings, for tests

    def set_capacity(
        self, gpu_type_id: str, datacenter_id: str, count: int, product: str = "POD"
    ) -> None:
        """Free GPUs of this type in this data center from now on, for pods or (product
        `CLUSTER`) for Instant Clusters."""
        with self.lock:
            self.catalog.pool(product)[(gpu_type_id, datacenter_id)] = count

    def set_balance(self, dollars: float | None) -> None:
        """None = unlimited; otherwise a create needs one hour of its cost in balance."""
        with self.lock:
            self.balance = dollars

    def set_listing_lag(self, seconds: float) -> None:
        with self.lock:
            self.listing_lag = timedelta(seconds=seconds)

    def catch_up_listing(self) -> None:
        """Every pod, cluster and network volume shows in its list from now on, as once
        its lag has passed."""
        with self.lock:
            for listed in (
                *self.pods.values(),
                *self.clusters.values(),
                *self.volumes.live.values(),
            ):
                listed.listed_from = None

    def set_image_pull_seconds(self, image: str, seconds: float) -> None:
        with self.lock:
            self.pull_seconds[image] = seconds

    def set_image_cuda(self, image: str, version: str) -> None:
        """The image requires a host driver of CUDA `version` or newer, as an image's
        `NVIDIA_REQUIRE_CUDA=cuda>=12.6` does: on an older host its container cannot
        start."""
        with self.lock:
            self.image_cuda[image] = version

    def start_failure(self, pod: SimPod) -> tuple[str, ...] | None:
        """RunPod's system lines for a start of `pod` that cannot succeed where it was
        placed (empty: one that hangs without a word); None when it starts. Failures, in
        the order a real start meets them: the image pull, the host that never finishes
        starting, nvidia-container-cli's prestart hook (a GPU it cannot initialise, an
        image whose CUDA requirement is above the host driver's)."""
        refused = self.unpullable.get(pod.image)
        if refused is not None:
            return (f"error pulling image: Error response from daemon: {refused}",)
        fault = self.host_faults.get((pod.gpu_id, pod.datacenter_id))
        if fault == "stuck":
            return ()
        required = self.image_cuda.get(pod.image)
        cuda_short = (
            required is not None
            and pod.cuda_version is not None
            and cuda_key(pod.cuda_version) < cuda_key(required)
        )
        if fault is None and not cuda_short:
            return None
        hook = (
            "nvidia-container-cli: initialization error: nvml error: driver/library version "
            "mismatch: unknown"
            if fault == "gpu"
            else f"nvidia-container-cli: requirement error: unsatisfied condition: "
            f"cuda>={required}, please update your driver to a newer version, or use an "
            "earlier cuda container: unknown"
        )
        return (
            f"start container for {pod.image}: begin",
            "error starting container: Error response from daemon: failed to create task "
            "for container: failed to create shim task: OCI runtime create failed: runc "
            "create failed: unable to start container process: error during container init: "
            "error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected "
            "mode as 'legacy'",
            hook,
        )

    def set_image_unpullable(self, image: str, unauthorized: bool = False) -> None:
        """No host can pull `image`: it does not exist, or its registry refuses us."""
        with self.lock:
            self.unpullable[image] = (
                f'Head "https://registry-1.docker.io/v2/{image}/manifests/latest": '
                "unauthorized: authentication required"
                if unauthorized
                else f"pull access denied for {image}, repository does not exist or may "
                "require 'docker login': denied: requested access to the resource is denied"
            )

    def set_host_fault(self, gpu_type_id: str, datacenter_id: str, fault: str | None) -> None:
        """This type's hosts in this data center fail every start from now on: `gpu` (the
        driver cannot initialise the GPU), `stuck` (the start never finishes), None: mended."""
        with self.lock:
            if fault is None:
                self.host_faults.pop((gpu_type_id, datacenter_id), None)
            else:
                self.host_faults[(gpu_type_id, datacenter_id)] = fault

    def set_host_cuda(self, gpu_type_id: str, datacenter_id: str, version: str) -> None:
        """The CUDA version this type's hosts in this data center report from now on."""
        with self.lock:
            self.catalog.cuda[(gpu_type_id, datacenter_id)] = version

    def add_template(self, template_id: str, **settings: Any) -> None:
        """A pod template: `image`, `args`, `disk`, `ports`, `env` as in a create body."""
        with self.lock:
            self.templates[template_id] = settings
