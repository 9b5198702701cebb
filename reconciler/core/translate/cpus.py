"""What a pod without a GPU asks for, and which CPU flavor sizes serve it, best first.

RunPod sells CPU instances by the vCPU: a flavor has a range of vCPU counts (powers
of two), a RAM per vCPU and a price per vCPU. A pod's size is the chosen container's
CPU and memory (the larger of request and limit); each flavor serves it with the
smallest power of two whose vCPUs and RAM cover both. Like GPU types, stock is not a
condition (it ranks last), and `runpod.io/cpu-flavors` narrows and orders the flavors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import assert_never

from reconciler.core.config import PodsWithoutGpu, Settings
from reconciler.core.domain import Availability, Cloud, CpuFlavor, KubeObject
from reconciler.core.quantity import quantity_value
from reconciler.core.reasons import PodReason
from reconciler.core.translate.annotations import (
    CLOUD_TYPE,
    CPU_FLAVORS,
    GPU_TYPES,
    MAX_PRICE,
    REQUIRED_GPU_MEMORY,
    read,
    read_choice,
    read_list,
    read_price,
)
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.gpus import GPU_RESOURCE, allowed_datacenters, stock

# RunPod's GB: the contract states RAM in GB; taken as 10^9 bytes, the smaller reading,
# so that a flavor judged to fit does fit.
GB = 10**9

# Annotations that only make sense for a GPU: a pod carrying one wants a GPU instance.
GPU_ANNOTATIONS = (GPU_TYPES, REQUIRED_GPU_MEMORY)

Size = tuple[CpuFlavor, int]
"""A flavor and the vCPU count to create it with."""


@dataclass(frozen=True)
class CpuRequest:
    cpus: Decimal
    """Cores the container asks for (0: any)."""
    memory_bytes: Decimal
    allowed: tuple[str, ...] | None
    """Flavor ids or names in the user's order of preference; None accepts any."""
    max_price: float
    datacenter_ids: tuple[str, ...] | None


def runs_on_cpu(pod: KubeObject, job: KubeObject | None, settings: Settings) -> bool:
    """Whether the pod gets a CPU instance: it asks for no GPU (no nvidia.com/gpu, no GPU
    annotation) and --pods-without-gpu says cpu. With `refuse` such a pod fails."""
    resources = choose_container(pod).get("resources") or {}
    asks_gpu = any(GPU_RESOURCE in (resources.get(s) or {}) for s in ("requests", "limits"))
    if asks_gpu or any(read(pod, job, name) is not None for name in GPU_ANNOTATIONS):
        return False
    match settings.placement.pods_without_gpu:
        case PodsWithoutGpu.CPU:
            return True
        case PodsWithoutGpu.GPU:
            return False
        case PodsWithoutGpu.REFUSE:
            raise TranslationError(
                PodReason.GPU_REQUIRED,
                f"the pod asks for no GPU ({GPU_RESOURCE}), and this node runs only pods "
                "that do (--pods-without-gpu=refuse)",
                permanent=True,
            )
        case _:
            assert_never(settings.placement.pods_without_gpu)


def cpu_request(pod: KubeObject, job: KubeObject | None, settings: Settings) -> CpuRequest:
    cloud = read_choice(pod, job, CLOUD_TYPE, tuple(Cloud))
    if (cloud or settings.placement.cloud) != Cloud.SECURE:
        raise TranslationError(
            PodReason.UNSATISFIABLE_CPU_REQUEST,
            "RunPod sells CPU instances on the SECURE cloud only "
            f"(annotation {CLOUD_TYPE} or --cloud-type says COMMUNITY)",
            permanent=True,
        )
    max_price = read_price(pod, job, MAX_PRICE)
    resources = choose_container(pod).get("resources") or {}
    return CpuRequest(
        cpus=_largest(resources, "cpu"),
        memory_bytes=_largest(resources, "memory"),
        allowed=read_list(pod, job, CPU_FLAVORS),
        max_price=settings.caps.max_gpu_price if max_price is None else max_price,
        datacenter_ids=allowed_datacenters(pod, job, settings),
    )


def _largest(resources: KubeObject, name: str) -> Decimal:
    values = [(resources.get(s) or {}).get(name) for s in ("requests", "limits")]
    try:
        return max((quantity_value(str(v)) for v in values if v is not None), default=Decimal(0))
    except ValueError as error:
        # The API server validates quantities; this is a spec it never saw.
        raise TranslationError(PodReason.INVALID_POD_SPEC, str(error), permanent=True) from None


def vcpus_for(request: CpuRequest, flavor: CpuFlavor) -> int | None:
    """The smallest power of two in the flavor's range whose vCPUs and RAM cover the pod."""
    per_vcpu = Decimal(str(flavor.ram_gb_per_vcpu)) * GB
    if per_vcpu <= 0:
        return None
    need = max(request.cpus, request.memory_bytes / per_vcpu, Decimal(flavor.vcpu_min), Decimal(2))
    count = 1 << (math.ceil(need) - 1).bit_length()
    return count if count <= flavor.vcpu_max else None


def price(flavor: CpuFlavor, vcpus: int) -> float:
    return round(flavor.price_per_vcpu * vcpus, 6)


def placement(request: CpuRequest, flavor: CpuFlavor) -> tuple[str, ...]:
    """Allowed data centers with stock, best first; all allowed ones when none has stock."""
    stocked = sorted(
        (
            dc
            for dc in flavor.datacenters
            if dc.availability > Availability.NONE
            and (request.datacenter_ids is None or dc.id in request.datacenter_ids)
        ),
        key=lambda dc: (-dc.availability, dc.id),
    )
    return tuple(dc.id for dc in stocked) or (request.datacenter_ids or ())


def _position(request: CpuRequest, flavor: CpuFlavor) -> int | None:
    names = {flavor.id.casefold(), flavor.name.casefold()}
    for position, entry in enumerate(request.allowed or ()):
        if entry.casefold() in names:
            return position
    return None


def rank(request: CpuRequest, catalog: Sequence[CpuFlavor]) -> list[Size]:
    """Fitting sizes: in stock first, then by allow-list position, then by price."""
    sizes = []
    for flavor in catalog:
        vcpus = vcpus_for(request, flavor)
        allowed = request.allowed is None or _position(request, flavor) is not None
        priced = flavor.price_per_vcpu > 0  # no usable price: unusable, never free
        if vcpus is not None and allowed and priced and price(flavor, vcpus) <= request.max_price:
            sizes.append((flavor, vcpus))

    def key(size: Size) -> tuple[bool, int, float, int, str]:
        flavor, vcpus = size
        level = stock(flavor, request.datacenter_ids)
        position = _position(request, flavor) or 0
        return (level is Availability.NONE, position, price(flavor, vcpus), -level, flavor.id)

    return sorted(sizes, key=key)


def explain_unsatisfiable(request: CpuRequest, catalog: Sequence[CpuFlavor]) -> str:
    """Why no flavor fits, naming the largest offer when the pod is too big."""
    if not catalog:
        return "RunPod's CPU catalog is empty"
    allowed = [f for f in catalog if request.allowed is None or _position(request, f) is not None]
    if not allowed:
        return (
            f"none of the CPU flavors in annotation {CPU_FLAVORS} "
            f"({', '.join(request.allowed or ())}) is in RunPod's CPU catalog"
        )
    sized = [(f, v) for f in allowed if (v := vcpus_for(request, f)) is not None]
    if not sized:
        largest = max(allowed, key=lambda f: (f.vcpu_max * f.ram_gb_per_vcpu, f.vcpu_max))
        return (
            f"no CPU flavor offers {request.cpus.normalize():f} vCPUs with "
            f"{request.memory_bytes / GB:.1f} GB of RAM; the largest offer is {largest.id} "
            f"with {largest.vcpu_max} vCPUs and {largest.vcpu_max * largest.ram_gb_per_vcpu:g} GB"
        )
    sized = [(f, v) for f, v in sized if f.price_per_vcpu > 0]
    if not sized:
        return "RunPod's CPU catalog gives no usable price for any fitting CPU flavor"
    cheapest = min(price(f, v) for f, v in sized)
    return (
        f"the cheapest fitting CPU instance costs {cheapest:.2f} USD/h, above the limit of "
        f"{request.max_price:.2f} USD/h"
    )
