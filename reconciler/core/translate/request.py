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
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV, STOP_ON_EXIT_ENV, exit_nonce
from reconciler.core.domain import (
    Availability,
    CpuFlavor,
    CreateRequest,
    GpuType,
    KubeObject,
    RunPodVolume,
)
from reconciler.core.reasons import PodReason
from reconciler.core.translate.annotations import (
    CONTAINER_REGISTRY_AUTH_ID,
    TEMPLATE_ID,
    TEMPLATE_ID_LEGACY,
    check_offload,
    read_id,
)
from reconciler.core.translate.claims import ClaimMount
from reconciler.core.translate.container import choose_container, instance_args, is_batch
from reconciler.core.translate.disks import Disks, disks_for
from reconciler.core.translate.env import EnvSources, container_env
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.gpus import stock
from reconciler.core.translate.image import check_image
from reconciler.core.translate.names import instance_name
from reconciler.core.translate.offers import Offer, in_datacenter, ranked_offers, require_catalog
from reconciler.core.translate.ports import instance_ports
from reconciler.core.translate.pull_secrets import registry_credentials
from reconciler.core.translate.ssh import ssh_env, ssh_ports

# registry_credentials belongs to the create inputs the engine gathers for a pod.
__all__ = ["create_requests", "placed_offers", "registry_credentials", "requests_out_of_stock"]


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
    on_cpu = require_catalog(pod, job, catalog, cpu_catalog, settings)
    check_offload(pod, job, int(YEAR))
    offers = ranked_offers(pod, job, catalog, cpu_catalog, settings)
    disks = disks_for(pod, job, settings, network_volumes, claim)
    base = _instance(pod, job, sources, settings, owner_id, disks)
    if on_cpu and base.persistent_volume is not None:
        raise TranslationError(
            PodReason.UNSATISFIABLE_CPU_REQUEST,
            "RunPod CPU instances take no persistent volume (runpod.io/volume-gb); use a "
            "network volume, or ask for a GPU",
            permanent=True,
        )
    auth = read_id(pod, job, CONTAINER_REGISTRY_AUTH_ID) or registry_auth_id
    candidates = [_fields(offer) for offer in in_datacenter(offers, disks.datacenter)]
    return [replace(base, registry_auth_id=auth, **fields) for fields in candidates]


def placed_offers(
    pod: KubeObject,
    job: KubeObject | None,
    catalog: Sequence[GpuType],
    cpu_catalog: Sequence[CpuFlavor],
    settings: Settings,
    network_volumes: Sequence[RunPodVolume] | None = None,
    claim: ClaimMount | None = None,
) -> list[Offer]:
    """The offers `create_requests` tries, in its order and where it tries them (ranked,
    then each limited to the pod's network volume's data center), without the rest of
    the request: what `reconciler offers` shows."""
    offers = ranked_offers(pod, job, catalog, cpu_catalog, settings)
    disks = disks_for(pod, job, settings, network_volumes, claim)
    return in_datacenter(offers, disks.datacenter)


def _fields(offer: Offer) -> dict[str, Any]:
    """What one offer sets on the create request."""
    if offer.on_cpu:
        chosen: dict[str, Any] = {"cpu_flavor_id": offer.offer_id, "vcpu_count": offer.count}
        chosen["gpu_count"] = 0
    else:
        chosen = {"gpu_type_id": offer.offer_id, "gpu_count": offer.count}
    return {
        **chosen,
        "cloud": offer.cloud,
        "datacenter_ids": offer.datacenter_ids,
        "hourly_price": offer.hourly_price,
    }


def _instance(
    pod: KubeObject,
    job: KubeObject | None,
    sources: EnvSources,
    settings: Settings,
    owner_id: str,
    disks: Disks,
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
    if not settings.ssh.public_key:
        return request
    # A template's ports apply only when the request sends none: adding 22/tcp there
    # would drop them, so such a pod gets the key but no direct SSH.
    keeps_template_ports = template is not None and not request.ports
    return replace(
        request,
        env=ssh_env(request.env, settings.ssh.public_key),
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
