"""What GPU a pod asks for, and which catalog types can serve it, best first.

RunPod creates on one GPU type per call with no fallback, so the reconciler ranks the
candidates itself and tries them in order. A type is a candidate when it could ever
serve the pod: offered in the pod's cloud, enough memory, enough GPUs per machine,
within the price cap for the whole pod and in the allow-list. Stock is not a condition,
because it changes by the minute: a type without stock stays a candidate and ranks last.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reconciler.core.config import Settings
from reconciler.core.domain import Availability, Cloud, CpuFlavor, GpuType, KubeObject
from reconciler.core.reasons import PodReason
from reconciler.core.translate.annotations import (
    CLOUD_TYPE,
    DATACENTER_IDS,
    GPU_TYPES,
    MAX_PRICE,
    REQUIRED_GPU_MEMORY,
    read_choice,
    read_int,
    read_list,
    read_price,
)
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.errors import TranslationError

GPU_RESOURCE = "nvidia.com/gpu"
# Well above any GPU sold; a larger number is a typo (GB per GPU).
MAX_GPU_MEMORY_GB = 2048
_COUNT = re.compile(r"[0-9]{1,6}")

Candidate = tuple[GpuType, tuple[str, ...]]


@dataclass(frozen=True)
class GpuRequest:
    count: int
    min_memory_gb: int | None
    """Memory per GPU; None accepts any."""
    allowed_types: tuple[str, ...] | None
    """GPU type ids or names in the user's order of preference; None accepts any."""
    max_price: float
    """USD per hour for all `count` GPUs together."""
    cloud: Cloud
    datacenter_ids: tuple[str, ...] | None
    """Where the instance may run; None means anywhere."""


def gpu_request(pod: KubeObject, job: KubeObject | None, settings: Settings) -> GpuRequest:
    max_price = read_price(pod, job, MAX_PRICE)
    cloud = read_choice(pod, job, CLOUD_TYPE, tuple(Cloud))
    return GpuRequest(
        count=gpu_count(choose_container(pod)),
        min_memory_gb=read_int(pod, job, REQUIRED_GPU_MEMORY, maximum=MAX_GPU_MEMORY_GB),
        allowed_types=read_list(pod, job, GPU_TYPES),
        max_price=settings.caps.max_gpu_price if max_price is None else max_price,
        cloud=settings.placement.cloud if cloud is None else Cloud(cloud),
        datacenter_ids=allowed_datacenters(pod, job, settings),
    )


def gpu_count(container: KubeObject) -> int:
    """The container's nvidia.com/gpu limit, else its request, else one GPU."""
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(GPU_RESOURCE)
        if value is not None:
            return _parse_count(str(value))
    return 1


def _parse_count(value: str) -> int:
    if not _COUNT.fullmatch(value) or int(value) < 1:
        # Container resources cannot be edited on a live pod: permanent.
        raise TranslationError(
            PodReason.UNSATISFIABLE_GPU_REQUEST,
            f'{GPU_RESOURCE}: "{value}" is not a whole number of GPUs of at least 1',
            permanent=True,
        )
    return int(value)


def allowed_datacenters(
    pod: KubeObject, job: KubeObject | None, settings: Settings
) -> tuple[str, ...] | None:
    wanted = read_list(pod, job, DATACENTER_IDS)
    allowed = settings.placement.datacenter_ids
    if wanted is None or not allowed:
        return wanted or allowed or None
    both = tuple(dc for dc in wanted if dc in allowed)
    if not both:
        raise TranslationError(
            PodReason.UNSATISFIABLE_GPU_REQUEST,
            f"annotation {DATACENTER_IDS} asks for {', '.join(wanted)}, but this node may "
            f"only use {', '.join(allowed)}",
            permanent=True,
        )
    return both


def _allow_position(request: GpuRequest, gpu: GpuType) -> int | None:
    """Index of the allow-list entry naming the type (by id or name, any case)."""
    names = {gpu.id.casefold(), gpu.name.casefold()}
    for position, entry in enumerate(request.allowed_types or ()):
        if entry.casefold() in names:
            return position
    return None


def _pod_price(request: GpuRequest, gpu: GpuType) -> float:
    # Rounded so that 3 x 0.1 is not judged above a 0.3 cap by float noise.
    return round(gpu.price(request.cloud) * request.count, 6)


_Check = Callable[[GpuRequest, GpuType], bool]
_Explain = Callable[[GpuRequest, Sequence[GpuType]], str]

# In the order explain_unsatisfiable reports them, most basic first.
_CHECKS: tuple[tuple[_Check, _Explain], ...] = (
    (
        lambda r, g: r.allowed_types is None or _allow_position(r, g) is not None,
        lambda r, _: (
            f"none of the GPU types in annotation {GPU_TYPES} "
            f"({', '.join(r.allowed_types or ())}) is in RunPod's catalog"
        ),
    ),
    (
        lambda r, g: g.offered_in(r.cloud),
        lambda r, _: f"no acceptable GPU type is offered in the {r.cloud.value} cloud",
    ),
    (
        lambda r, g: r.min_memory_gb is None or g.memory_gb >= r.min_memory_gb,
        lambda r, gs: (
            f"no acceptable GPU type has {r.min_memory_gb} GB of memory "
            f"(the most is {max(g.memory_gb for g in gs)} GB)"
        ),
    ),
    (
        lambda r, g: r.count <= g.max_count(r.cloud),
        lambda r, gs: (
            f"no acceptable GPU type offers {r.count} GPUs per pod in the "
            f"{r.cloud.value} cloud (the most is {max(g.max_count(r.cloud) for g in gs)})"
        ),
    ),
    (
        lambda r, g: g.price(r.cloud) > 0,
        lambda r, _: (
            f"RunPod's catalog gives no usable price for any acceptable GPU type in the "
            f"{r.cloud.value} cloud (an offer without one is never taken as free)"
        ),
    ),
    (
        lambda r, g: _pod_price(r, g) <= r.max_price,
        lambda r, gs: (
            f"the cheapest acceptable GPU type costs "
            f"{min(_pod_price(r, g) for g in gs):.2f} USD/h for {r.count} GPU(s), above the "
            f"limit of {r.max_price:.2f} USD/h"
        ),
    ),
)


def fits(request: GpuRequest, gpu: GpuType) -> bool:
    return all(check(request, gpu) for check, _ in _CHECKS)


def explain_unsatisfiable(request: GpuRequest, catalog: Sequence[GpuType]) -> str:
    """Why no type fits: the first requirement that rules out every remaining type."""
    remaining = list(catalog)
    if not remaining:
        return "RunPod's GPU catalog is empty"
    for check, explain in _CHECKS:
        kept = [gpu for gpu in remaining if check(request, gpu)]
        if not kept:
            return explain(request, remaining)
        remaining = kept
    return f"{len(remaining)} GPU type(s) fit the request"


def unknown_datacenters(
    wanted: Sequence[str], catalog: Sequence[GpuType | CpuFlavor]
) -> tuple[str, ...]:
    """The data centers in `wanted` where the catalog offers no GPU type at all: a typo,
    or one RunPod closed. Nothing when the catalog names no data center (it cannot say)."""
    known = {dc.id for gpu in catalog for dc in gpu.datacenters}
    return tuple(dc for dc in wanted if dc not in known) if known else ()


def stock(gpu: GpuType | CpuFlavor, datacenter_ids: tuple[str, ...] | None) -> Availability:
    """Best availability of the type (or CPU flavor) in the given data centers (None:
    anywhere)."""
    if datacenter_ids is None or not gpu.datacenters:
        return gpu.availability
    levels = [dc.availability for dc in gpu.datacenters if dc.id in datacenter_ids]
    return max(levels, default=Availability.NONE)


def _placement(request: GpuRequest, gpu: GpuType) -> tuple[str, ...]:
    """Allowed data centers with stock, best first; all allowed ones when none has stock."""
    stocked = sorted(
        (
            dc
            for dc in gpu.datacenters
            if dc.availability > Availability.NONE
            and (request.datacenter_ids is None or dc.id in request.datacenter_ids)
        ),
        key=lambda dc: (-dc.availability, dc.id),
    )
    return tuple(dc.id for dc in stocked) or (request.datacenter_ids or ())


def rank(request: GpuRequest, catalog: Sequence[GpuType]) -> list[Candidate]:
    """Fitting types with their data centers: in stock first, then by allow-list
    position (else price), then by price and availability."""

    def key(gpu: GpuType) -> tuple[bool, int, float, int, str]:
        level = stock(gpu, request.datacenter_ids)
        position = _allow_position(request, gpu) or 0
        return (level is Availability.NONE, position, _pod_price(request, gpu), -level, gpu.id)

    ranked = sorted((gpu for gpu in catalog if fits(request, gpu)), key=key)
    return [(gpu, _placement(request, gpu)) for gpu in ranked]
