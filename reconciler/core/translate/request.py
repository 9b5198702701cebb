"""A pod turned into the create requests to try, best GPU type (or CPU flavor) first.

This is the translation's entry point: it checks everything the pod asks for before
anything is created, so a bad annotation or a missing Secret shows up as a reason on
the pod instead of as a RunPod error, and the requests differ only in GPU type (or CPU
flavor and size) and data centers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from reconciler.core.config import YEAR, Settings
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV, STOP_ON_EXIT_ENV
from reconciler.core.domain import (
    Availability,
    Cloud,
    CpuFlavor,
    CreateRequest,
    GpuType,
    KubeObject,
    RunPodVolume,
)
from reconciler.core.podlogs import exit_nonce
from reconciler.core.reasons import PodReason
from reconciler.core.sshaccess import ssh_env, ssh_ports
from reconciler.core.translate import cpus
from reconciler.core.translate.annotations import (
    CONTAINER_REGISTRY_AUTH_ID,
    DATACENTER_IDS,
    TEMPLATE_ID,
    TEMPLATE_ID_LEGACY,
    check_offload,
    read_id,
    read_list,
)
from reconciler.core.translate.claims import ClaimMount
from reconciler.core.translate.container import choose_container, instance_args, is_batch
from reconciler.core.translate.cpus import runs_on_cpu
from reconciler.core.translate.env import EnvSources, container_env
from reconciler.core.translate.errors import TranslationError, invalid_annotation
from reconciler.core.translate.gpus import explain_unsatisfiable, gpu_request, rank, stock
from reconciler.core.translate.image import check_image
from reconciler.core.translate.names import instance_name
from reconciler.core.translate.ports import instance_ports
from reconciler.core.translate.registry import registry_credentials
from reconciler.core.translate.storage import Storage, storage

# registry_credentials belongs to the create inputs the engine gathers for a pod.
__all__ = ["create_requests", "registry_credentials", "requests_out_of_stock"]


def create_requests(
    pod: KubeObject,
    job: KubeObject | None,
    sources: EnvSources,
    catalog: Sequence[GpuType],
    settings: Settings,
    owner_id: str,
    registry_auth_id: str | None = None,
    cpu_catalog: Sequence[CpuFlavor] = (),
    network_volumes: Sequence[RunPodVolume] | None = None,
    claim: ClaimMount | None = None,
) -> list[CreateRequest]:
    """One request per fitting GPU type (or CPU flavor, for a pod that asks for no GPU),
    in the order to try them; or TranslationError. `network_volumes`: the account's
    (None: not listed), for a pod that mounts one."""
    on_cpu = runs_on_cpu(pod, job, settings)
    offers: Sequence[GpuType | CpuFlavor] = cpu_catalog if on_cpu else catalog
    if not offers:
        # An empty catalog is a failed fetch, not proof that nothing will ever fit.
        raise TranslationError(
            PodReason.GPU_CATALOG_UNAVAILABLE,
            f"RunPod's {'CPU' if on_cpu else 'GPU'} catalog is not available",
            permanent=False,
        )
    check_offload(pod, job, int(YEAR))
    _check_datacenters(pod, job, offers)
    candidates = (
        _cpu_candidates(pod, job, cpu_catalog, settings)
        if on_cpu
        else _gpu_candidates(pod, job, catalog, settings)
    )
    disks = storage(pod, job, settings, network_volumes, claim)
    base = _instance(pod, job, sources, settings, owner_id, disks)
    if on_cpu and base.persistent_volume is not None:
        raise TranslationError(
            PodReason.UNSATISFIABLE_CPU_REQUEST,
            "RunPod CPU instances take no persistent volume (runpod.io/volume-gb); use a "
            "network volume, or ask for a GPU",
            permanent=True,
        )
    auth = read_id(pod, job, CONTAINER_REGISTRY_AUTH_ID) or registry_auth_id
    if disks.datacenter is not None:
        candidates = _in_datacenter(candidates, disks.datacenter)
    return [replace(base, registry_auth_id=auth, **fields) for fields in candidates]


def _in_datacenter(candidates: list[dict[str, Any]], datacenter: str) -> list[dict[str, Any]]:
    """Each candidate limited to the network volume's data center; those the pod's own
    data centers exclude it from are dropped."""
    pinned = [
        {**fields, "datacenter_ids": (datacenter,)}
        for fields in candidates
        if not fields["datacenter_ids"] or datacenter in fields["datacenter_ids"]
    ]
    if not pinned:
        raise TranslationError(
            PodReason.NETWORK_VOLUME_UNAVAILABLE,
            f"the network volume is in data center {datacenter}, where nothing that fits "
            "this pod is offered now or allowed (runpod.io/datacenter-ids, --datacenter-ids)",
            permanent=False,
        )
    return pinned


def _gpu_candidates(
    pod: KubeObject, job: KubeObject | None, catalog: Sequence[GpuType], settings: Settings
) -> list[dict[str, Any]]:
    request = gpu_request(pod, job, settings)
    candidates = rank(request, catalog)
    if not candidates:
        raise TranslationError(
            PodReason.UNSATISFIABLE_GPU_REQUEST,
            explain_unsatisfiable(request, catalog),
            permanent=True,
        )
    return [
        {
            "gpu_type_id": gpu.id,
            "gpu_count": request.count,
            "cloud": request.cloud,
            "datacenter_ids": datacenters,
            "hourly_price": round(gpu.price(request.cloud) * request.count, 6),
        }
        for gpu, datacenters in candidates
    ]


def _cpu_candidates(
    pod: KubeObject, job: KubeObject | None, catalog: Sequence[CpuFlavor], settings: Settings
) -> list[dict[str, Any]]:
    request = cpus.cpu_request(pod, job, settings)
    sizes = cpus.rank(request, catalog)
    if not sizes:
        raise TranslationError(
            PodReason.UNSATISFIABLE_CPU_REQUEST,
            cpus.explain_unsatisfiable(request, catalog),
            permanent=True,
        )
    return [
        {
            "cpu_flavor_id": flavor.id,
            "vcpu_count": vcpus,
            "gpu_count": 0,
            "cloud": Cloud.SECURE,
            "datacenter_ids": cpus.placement(request, flavor),
            "hourly_price": cpus.price(flavor, vcpus),
        }
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


def _instance(
    pod: KubeObject,
    job: KubeObject | None,
    sources: EnvSources,
    settings: Settings,
    owner_id: str,
    disks: Storage,
) -> CreateRequest:
    """The fields every candidate shares; the GPU is filled in per candidate."""
    container = choose_container(pod)
    template = read_id(pod, job, TEMPLATE_ID) or read_id(pod, job, TEMPLATE_ID_LEGACY)
    image = str(container.get("image") or "")
    if not image and template is None:
        raise TranslationError(
            PodReason.INVALID_IMAGE_NAME,
            f'container "{container.get("name")}" has no image',
            permanent=False,
        )
    if image:
        check_image(image)
    env = container_env(pod, container, sources)
    request = CreateRequest(
        name=instance_name(pod),
        image=image,
        gpu_type_id="",
        args=instance_args(pod, container, env),
        env={**env, **_tags(pod, owner_id)},
        ports=instance_ports(pod, job, container),
        container_disk_gb=disks.container_disk_gb,
        persistent_volume=disks.persistent_volume,
        network_volume=disks.network_volume,
        template_id=template,
    )
    if not settings.ssh_public_key:
        return request
    # A template's ports apply only when the request sends none: adding 22/tcp there
    # would drop them, so such a pod gets the key but no direct SSH.
    keeps_template_ports = template is not None and not request.ports
    return replace(
        request,
        env=ssh_env(request.env, settings.ssh_public_key),
        ports=request.ports if keeps_template_ports else ssh_ports(request.ports),
        start_ssh=True,
    )


def _tags(pod: KubeObject, owner_id: str) -> dict[str, str]:
    """Our identity tags; they override any same-named variable the pod sets
    (docs/architecture.md §3)."""
    tags = {OWNER_ENV: owner_id, POD_UID_ENV: str(pod["metadata"]["uid"])}
    if is_batch(pod):
        tags[STOP_ON_EXIT_ENV] = exit_nonce(str(pod["metadata"]["uid"]))
    return tags


def requests_out_of_stock(
    requests: Sequence[CreateRequest],
    catalog: Sequence[GpuType],
    cpu_catalog: Sequence[CpuFlavor] = (),
) -> bool:
    """True when no request's GPU type (or CPU flavor) has stock in its data centers
    (wait, don't fail)."""
    offers: dict[str, GpuType | CpuFlavor] = {gpu.id: gpu for gpu in catalog}
    offers.update((flavor.id, flavor) for flavor in cpu_catalog)
    return all(
        stock(offers[r.offer_id], r.datacenter_ids or None) is Availability.NONE
        for r in requests
        if r.offer_id in offers
    )
