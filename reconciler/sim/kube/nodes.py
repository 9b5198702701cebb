"""The API server's rules for Node objects, and quantities wherever a client writes them.

- Quantities (node capacity and allocatable, container requests and limits) are stored
  canonically (`quantity`); one that does not parse is refused by the decoder (400).
- `status.daemonEndpoints` is always there (`Port` 0 when no kubelet port was given).
- Capacity and allocatable may not be negative, and extended resources (a domain-prefixed
  name such as `nvidia.com/gpu`) must be whole numbers (422).
- Taints: a known effect, a qualified-name key, unique by key and effect (422).
- Updates: no duplicate entry in `status.addresses`; `spec.providerID` is set once (422).
- `preferred_address`: where the API server reaches a node's kubelet (logs, exec). It
  walks `--kubelet-preferred-address-types` (Hostname first by default), not the order
  of the list, so any Hostname address wins over an InternalIP.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.sim.kube import quantity
from reconciler.sim.kube.status import ApiError

Causes = list[tuple[str, str]]

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# kube-apiserver's default --kubelet-preferred-address-types.
PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
_QUALIFIED_NAME = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_NODE_QUANTITIES = ("capacity", "allocatable")


def canonicalize_node(node: dict[str, Any]) -> None:
    status = node.get("status")
    if isinstance(status, dict):
        for field in _NODE_QUANTITIES:
            _canonicalize(status.get(field), f"status.{field}")
        # A struct, not a pointer, in the Go type: `omitempty` never drops it.
        endpoint = status.setdefault("daemonEndpoints", {}).setdefault("kubeletEndpoint", {})
        endpoint.setdefault("Port", 0)


def canonicalize_pod(pod: dict[str, Any]) -> None:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(kind) or []):
            resources = container.get("resources") if isinstance(container, dict) else None
            for field in ("requests", "limits"):
                if isinstance(resources, dict):
                    _canonicalize(resources.get(field), f"spec.{kind}[{index}].resources.{field}")


def _canonicalize(quantities: Any, path: str) -> None:
    if not isinstance(quantities, dict):
        return
    for name, value in quantities.items():
        try:
            quantities[name] = quantity.canonical(value)
        except quantity.QuantityError as error:
            raise ApiError(400, f"{path}[{name}]: {error}", "BadRequest") from error


def node_causes(node: dict[str, Any]) -> Causes:
    causes: Causes = []
    status = node.get("status") or {}
    for field in _NODE_QUANTITIES:
        for name, value in (status.get(field) or {}).items():
            path = f"status.{field}[{name}]"
            if quantity.is_negative(value):
                causes.append(
                    (path, f'Invalid value: "{value}": must be greater than or equal to 0')
                )
            elif _is_extended(name) and not quantity.is_whole(value):
                causes.append((path, f'Invalid value: "{value}": must be an integer'))
    return causes + _taint_causes((node.get("spec") or {}).get("taints") or [])


def node_update_causes(old: dict[str, Any], new: dict[str, Any]) -> Causes:
    causes: Causes = []
    seen: list[Any] = []
    for index, address in enumerate((new.get("status") or {}).get("addresses") or []):
        if address in seen:
            causes.append((f"status.addresses[{index}]", f"Duplicate value: {address}"))
        seen.append(address)
    old_id = (old.get("spec") or {}).get("providerID")
    if old_id and (new.get("spec") or {}).get("providerID") != old_id:
        causes.append(
            (
                "spec.providerID",
                'Forbidden: node updates may not change providerID except from "" to valid',
            )
        )
    return causes


def preferred_address(node: dict[str, Any]) -> str | None:
    addresses = (node.get("status") or {}).get("addresses") or []
    for kind in PREFERRED_ADDRESS_TYPES:
        for address in addresses:
            if address.get("type") == kind and address.get("address"):
                return str(address["address"])
    return None


def _is_extended(name: str) -> bool:
    """A resource outside the kubernetes.io namespace, such as nvidia.com/gpu."""
    return (
        "/" in name
        and not name.split("/")[0].endswith("kubernetes.io")
        and not name.startswith("requests.")
    )


def _taint_causes(taints: list[Any]) -> Causes:
    causes: Causes = []
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(taints):
        path = f"spec.taints[{index}]"
        key, effect = str(taint.get("key") or ""), str(taint.get("effect") or "")
        if not _QUALIFIED_NAME.fullmatch(key) or len(key.rsplit("/", 1)[-1]) > 63:
            causes.append(
                (
                    f"{path}.key",
                    f'Invalid value: "{key}": name part must consist '
                    "of alphanumeric characters, '-', '_' or '.'",
                )
            )
        if effect not in TAINT_EFFECTS:
            causes.append(
                (
                    f"{path}.effect",
                    f'Unsupported value: "{effect}": supported values: {", ".join(TAINT_EFFECTS)}',
                )
            )
        if (key, effect) in seen:
            causes.append((path, "Duplicate value: taints must be unique by key and effect pair"))
        seen.add((key, effect))
    return causes
