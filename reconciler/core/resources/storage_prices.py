"""What storage costs per hour: our network volumes' for the spend caps, and each
instance's own disks (container disk and persistent volume) for its max price and the
caps, counted with its GPU before the create is sent.

RunPod's API publishes no storage price: the contract's network volume has none, and the
billing routes tell what was charged, not the rate. RunPod's billing documentation
(docs.runpod.io, "Billing information") lists $0.07 per GB and month for network volumes
below 1 TB and $0.05 above; no price for the HIGH_PERFORMANCE tier is published, so it
is taken as twice the standard one. The caps count every GB at these flat rates, which
can only err high (a volume above 1 TB costs less), and a month as 730 hours.

An instance's disks are priced by the same documentation (docs.runpod.io, "Storage
options"): $0.10 per GB and month of container disk, and of a persistent volume $0.10
while the pod runs and $0.20 while it is stopped; the caps count the stopped rate.

A volume counts from its PersistentVolume (which we made: the PV says its size and
type, and its claim's namespace), whatever its phase: storage bills until the volume
is deleted, whether a pod mounts it or not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from reconciler.core.actions import CreateNetworkVolume
from reconciler.core.domain import CreateRequest, Instance, KubeObject
from reconciler.core.quantity import quantity_value
from reconciler.core.resources.volume_objects import (
    GB,
    PROVISIONED_BY,
    PROVISIONER,
    is_our_volume_object,
)

USD_PER_GB_MONTH = {"STANDARD": 0.07, "HIGH_PERFORMANCE": 0.14}
"""STANDARD is RunPod's published price; HIGH_PERFORMANCE is an assumption (none is
published)."""
HOURS_PER_MONTH = 730
CONTAINER_DISK_USD_PER_GB_MONTH = 0.10
VOLUME_DISK_USD_PER_GB_MONTH = 0.20
"""A persistent volume's stopped rate (running: 0.10): it can only err high."""


def disks_hourly(container_gb: int | None, volume_gb: int | None) -> float:
    """USD per hour of an instance's container disk and persistent volume."""
    usd = max(0, container_gb or 0) * CONTAINER_DISK_USD_PER_GB_MONTH
    usd += max(0, volume_gb or 0) * VOLUME_DISK_USD_PER_GB_MONTH
    return usd / HOURS_PER_MONTH


def with_disks(request: CreateRequest) -> CreateRequest:
    """The request priced with its disks: its `hourly_price` is what it costs in all."""
    volume = request.persistent_volume.size_gb if request.persistent_volume else None
    storage = disks_hourly(request.container_disk_gb, volume)
    return replace(request, hourly_price=round(request.hourly_price + storage, 6))


def within_max_price(
    requests: Sequence[CreateRequest], max_price: float
) -> tuple[list[CreateRequest], str | None]:
    """The requests priced with their disks that stay within the pod's max price; when
    none does, why (the GPU alone was checked against it when the offers were ranked)."""
    priced = [with_disks(r) for r in requests]
    kept = [r for r in priced if r.hourly_price <= max_price]
    if kept or not priced:
        return kept, None
    first = requests[0]
    volume = first.persistent_volume.size_gb if first.persistent_volume else 0
    disks = disks_hourly(first.container_disk_gb, volume)
    cheapest = min(r.hourly_price for r in priced)
    return [], (
        f"with its disks ({first.container_disk_gb or 0} GB container disk, {volume} GB "
        f"volume: {disks:.2f} USD/h) the cheapest fitting offer costs {cheapest:.2f} USD/h, "
        f"above the limit of {max_price:.2f} USD/h"
    )


def instance_hourly(instance: Instance) -> float:
    """What a listed instance costs per hour: RunPod's price and its disks."""
    return instance.cost_per_hr + disks_hourly(instance.container_disk_gb, instance.volume_gb)


def hourly_usd(size_gb: int, kind: str | None) -> float:
    rate = USD_PER_GB_MONTH.get(kind or "STANDARD", max(USD_PER_GB_MONTH.values()))
    return size_gb * rate / HOURS_PER_MONTH


def by_namespace(volumes: Iterable[KubeObject]) -> dict[str | None, float]:
    """USD per hour of the storage of the network volumes we provisioned, by the
    namespace of the claim each PV names (None: it names none); PVs of someone's volume
    made by hand are not ours to count."""
    found: dict[str | None, float] = {}
    for pv in volumes:
        annotations = (pv.get("metadata") or {}).get("annotations") or {}
        if not is_our_volume_object(pv) or annotations.get(PROVISIONED_BY) != PROVISIONER:
            continue
        spec = pv.get("spec") or {}
        namespace = (spec.get("claimRef") or {}).get("namespace")
        try:
            size = quantity_value(str((spec.get("capacity") or {})["storage"])) / Decimal(GB)
        except (KeyError, ValueError, ArithmeticError):
            continue  # no readable size: nothing to count (and nothing we made)
        kind = ((spec.get("csi") or {}).get("volumeAttributes") or {}).get("type")
        found[namespace or None] = found.get(namespace or None, 0.0) + hourly_usd(
            math.ceil(size), kind
        )
    return found


def with_creates(
    spend: Mapping[str | None, float], actions: Iterable[Any]
) -> dict[str | None, float]:
    """`spend` with the volumes these actions create (the PV list the next tick reads
    may not show them yet; counting a create that failed errs high for a tick)."""
    found = dict(spend)
    for action in actions:
        if isinstance(action, CreateNetworkVolume):
            namespace = action.claim.namespace
            found[namespace] = found.get(namespace, 0.0) + hourly_usd(action.size_gb, action.type)
    return found
