"""What our network volumes' storage costs per hour, for the spend caps.

RunPod's API publishes no storage price: the contract's network volume has none, and the
billing routes tell what was charged, not the rate. RunPod's billing documentation
(docs.runpod.io, "Billing information") lists $0.07 per GB and month for network volumes
below 1 TB and $0.05 above; no price for the HIGH_PERFORMANCE tier is published, so it
is taken as twice the standard one. The caps count every GB at these flat rates, which
can only err high (a volume above 1 TB costs less), and a month as 730 hours.

A volume counts from its PersistentVolume (which we made: the PV says its size and
type, and its claim's namespace), whatever its phase: storage bills until the volume
is deleted, whether a pod mounts it or not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from reconciler.core.actions import CreateNetworkVolume
from reconciler.core.domain import KubeObject
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
