"""The offers a pod would get: its GPU types (or CPU flavor sizes) ranked best first,
each with the data centers it would be tried in.

One ranking serves the create (`request.create_requests` turns each offer into a
request), a claim's data center (its first consumer's best offer) and `reconciler
offers`, so what the command shows is what the planner would try, in that order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from reconciler.core.config import Settings
from reconciler.core.domain import Availability, Cloud, CpuFlavor, GpuType, KubeObject
from reconciler.core.reasons import PodReason
from reconciler.core.translate import cpus
from reconciler.core.translate.annotations import DATACENTER_IDS, read_list
from reconciler.core.translate.cpus import runs_on_cpu
from reconciler.core.translate.errors import TranslationError, invalid_annotation
from reconciler.core.translate.gpus import explain_unsatisfiable, gpu_request, rank, stock


@dataclass(frozen=True)
class Offer:
    """One GPU type (or CPU flavor at a size) that can run the pod, as it would be asked
    for. `count` is GPUs, or vCPUs for a CPU flavor."""

    offer_id: str
    name: str
    on_cpu: bool
    count: int
    cloud: Cloud
    datacenter_ids: tuple[str, ...]
    """Where it would be tried, stocked ones best first; empty: anywhere."""
    hourly_price: float
    """USD per hour for the whole pod."""


@dataclass(frozen=True)
class OfferRow:
    """An offer in one data center, as `reconciler offers` shows it."""

    offer: Offer
    datacenter: str | None
    """None: the catalog names no data center for it (RunPod picks one)."""
    stock: Availability


def ranked_offers(
    pod: KubeObject,
    job: KubeObject | None,
    catalog: Sequence[GpuType],
    cpu_catalog: Sequence[CpuFlavor],
    settings: Settings,
) -> list[Offer]:
    """The pod's offers in the order a create tries them; TranslationError when the pod
    cannot be served (its reason says why)."""
    on_cpu = require_catalog(pod, job, catalog, cpu_catalog, settings)
    _check_datacenters(pod, job, cpu_catalog if on_cpu else catalog)
    if on_cpu:
        return _cpu_offers(pod, job, cpu_catalog, settings)
    return _gpu_offers(pod, job, catalog, settings)


def require_catalog(
    pod: KubeObject,
    job: KubeObject | None,
    catalog: Sequence[GpuType],
    cpu_catalog: Sequence[CpuFlavor],
    settings: Settings,
) -> bool:
    """Whether the pod runs on a CPU instance; TranslationError when the catalog it
    draws on is not there (a failed fetch, not proof that nothing will ever fit)."""
    on_cpu = runs_on_cpu(pod, job, settings)
    if not (cpu_catalog if on_cpu else catalog):
        raise TranslationError(
            PodReason.GPU_CATALOG_UNAVAILABLE,
            f"RunPod's {'CPU' if on_cpu else 'GPU'} catalog is not available",
            permanent=False,
        )
    return on_cpu


def offer_rows(
    offers: Sequence[Offer], catalog: Sequence[GpuType], cpu_catalog: Sequence[CpuFlavor]
) -> list[OfferRow]:
    """Each offer once per data center it would be tried in, with the stock there."""
    entries: dict[str, GpuType | CpuFlavor] = {gpu.id: gpu for gpu in catalog}
    entries.update((flavor.id, flavor) for flavor in cpu_catalog)
    rows = []
    for offer in offers:
        entry = entries[offer.offer_id]
        for datacenter in offer.datacenter_ids or (None,):
            where = None if datacenter is None else (datacenter,)
            rows.append(OfferRow(offer, datacenter, stock(entry, where)))
    return rows


def in_datacenter(offers: Sequence[Offer], datacenter: str | None) -> list[Offer]:
    """The offers of a pod whose network volume is in `datacenter` (None: it has none),
    each limited to it; those the pod's own data centers exclude it from are dropped."""
    if datacenter is None:
        return list(offers)
    pinned = [
        replace(offer, datacenter_ids=(datacenter,))
        for offer in offers
        if not offer.datacenter_ids or datacenter in offer.datacenter_ids
    ]
    if not pinned:
        raise TranslationError(
            PodReason.NETWORK_VOLUME_UNAVAILABLE,
            f"the network volume is in data center {datacenter}, where nothing that fits "
            "this pod is offered now or allowed (runpod.io/datacenter-ids, --datacenter-ids)",
            permanent=False,
        )
    return pinned


def first_datacenter(
    pod: KubeObject,
    job: KubeObject | None,
    catalog: Sequence[GpuType],
    cpu_catalog: Sequence[CpuFlavor],
    settings: Settings,
) -> str | None:
    """The data center of the pod's best offer (None: it has none, or the catalog names
    no data center for it)."""
    try:
        offers = ranked_offers(pod, job, catalog, cpu_catalog, settings)
    except TranslationError:
        return None
    return next((o.datacenter_ids[0] for o in offers if o.datacenter_ids), None)


def _gpu_offers(
    pod: KubeObject, job: KubeObject | None, catalog: Sequence[GpuType], settings: Settings
) -> list[Offer]:
    request = gpu_request(pod, job, settings)
    candidates = rank(request, catalog)
    if not candidates:
        raise TranslationError(
            PodReason.UNSATISFIABLE_GPU_REQUEST,
            explain_unsatisfiable(request, catalog),
            permanent=True,
        )
    return [
        Offer(
            gpu.id,
            gpu.name,
            False,
            request.count,
            request.cloud,
            datacenters,
            round(gpu.price(request.cloud) * request.count, 6),
        )
        for gpu, datacenters in candidates
    ]


def _cpu_offers(
    pod: KubeObject, job: KubeObject | None, catalog: Sequence[CpuFlavor], settings: Settings
) -> list[Offer]:
    request = cpus.cpu_request(pod, job, settings)
    sizes = cpus.rank(request, catalog)
    if not sizes:
        raise TranslationError(
            PodReason.UNSATISFIABLE_CPU_REQUEST,
            cpus.explain_unsatisfiable(request, catalog),
            permanent=True,
        )
    return [
        Offer(
            flavor.id,
            flavor.name,
            True,
            vcpus,
            Cloud.SECURE,
            cpus.placement(request, flavor),
            cpus.price(flavor, vcpus),
        )
        for flavor, vcpus in sizes
    ]


def _check_datacenters(
    pod: KubeObject, job: KubeObject | None, catalog: Sequence[GpuType | CpuFlavor]
) -> None:
    """At least one data center the pod names must be one the catalog lists GPUs in: a
    typo is a bad annotation to fix, not capacity to wait for (and costs no create).
    The others are preferences: one the catalog does not list now is only skipped."""
    wanted = read_list(pod, job, DATACENTER_IDS)
    known = {dc.id for gpu in catalog for dc in gpu.datacenters}
    unknown = [dc for dc in wanted or () if dc not in known]
    if known and wanted and len(unknown) == len(wanted):
        listed = ", ".join(sorted(known)[:12]) + (", ..." if len(known) > 12 else "")
        raise invalid_annotation(
            DATACENTER_IDS,
            ",".join(wanted or ()),
            f"a list of RunPod data centers ({', '.join(unknown)} "
            f"unknown; RunPod lists this kind of instance in {listed})",
        )
