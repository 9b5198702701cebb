"""The API server's rules for storage objects: StorageClass, CSIDriver,
PersistentVolume and PersistentVolumeClaim (pkg/apis/core/validation,
pkg/apis/storage/validation and their strategies, Kubernetes 1.32).

- Defaults: a StorageClass reclaims `Delete` and binds `Immediate`; a CSIDriver needs
  attaching, no pod info, `Persistent` volumes, `ReadWriteOnceWithFSType`; a new PV is
  `Pending`, a new claim `Pending`, both `Filesystem`.
- Quantities are stored canonical (`10G` stays `10G`, `10240Mi` becomes `10Gi`).
- Validation: a claim needs access modes (ReadWriteOncePod alone) and a positive storage
  request; a PV needs a capacity, access modes, exactly one volume source (CSI: a
  driver and a handle), a reclaim policy of Retain, Delete or Recycle.
- Updates: a class's provisioner, parameters, reclaim policy and binding mode are
  immutable; a CSIDriver's attachRequired and volumeLifecycleModes too; a PV's source;
  a claim's spec but for `volumeName` (set once) and, once Bound, the storage request,
  which may not go below `status.capacity`. A claim's status may hold only storage in
  `allocatedResources` and the resize states the API knows.
"""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any

from reconciler.sim.kube import quantity
from reconciler.sim.kube.resources import (
    CSI_DRIVERS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    Resource,
)
from reconciler.sim.kube.status import ApiError, invalid

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
RESIZE_STATUSES = (
    "ControllerResizeInProgress",
    "ControllerResizeInfeasible",
    "NodeResizeInProgress",
    "NodeResizeInfeasible",
    "NodeResizePending",
)
_CSI_DRIVER_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]")
_VOLUME_SOURCES = ("csi", "hostPath", "nfs", "local")

Causes = list[tuple[str, str]]


def prepare_for_create(resource: Resource, obj: dict[str, Any]) -> None:
    if resource is STORAGE_CLASSES:
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif resource is CSI_DRIVERS:
        spec = obj.setdefault("spec", {})
        spec.setdefault("attachRequired", True)
        spec.setdefault("podInfoOnMount", False)
        spec.setdefault("volumeLifecycleModes", ["Persistent"])
        spec.setdefault("fsGroupPolicy", "ReadWriteOnceWithFSType")
        spec.setdefault("requiresRepublish", False)
        spec.setdefault("storageCapacity", False)
        spec.setdefault("seLinuxMount", False)
    elif resource is PERSISTENT_VOLUMES:
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj.setdefault("spec", {}).setdefault("persistentVolumeReclaimPolicy", "Retain")
        obj["status"] = {"phase": "Pending"}
    elif resource is PERSISTENT_VOLUME_CLAIMS:
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}


def prepare_for_write(resource: Resource, obj: dict[str, Any]) -> None:
    """Quantities as the server stores them (a bad one is Go's decoder's 400)."""
    places: dict[Resource, list[tuple[str, ...]]] = {
        PERSISTENT_VOLUMES: [("spec", "capacity")],
        PERSISTENT_VOLUME_CLAIMS: [
            ("spec", "resources", "requests"),
            ("spec", "resources", "limits"),
            ("status", "capacity"),
            ("status", "allocatedResources"),
        ],
    }
    for path in places.get(resource, []):
        values = _dig(obj, path)
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            try:
                values[name] = quantity.canonical(value)
            except quantity.QuantityError as error:
                raise ApiError(400, f"quantities: {error}", "BadRequest") from error


def validate(resource: Resource, obj: dict[str, Any]) -> None:
    checks = {
        STORAGE_CLASSES: _class_causes,
        CSI_DRIVERS: _driver_causes,
        PERSISTENT_VOLUMES: _volume_causes,
        PERSISTENT_VOLUME_CLAIMS: _claim_causes,
    }
    causes = checks[resource](obj) if resource in checks else []
    if causes:
        raise invalid(resource.kind, obj["metadata"].get("name", ""), causes)


def validate_update(resource: Resource, old: dict[str, Any], new: dict[str, Any]) -> None:
    checks = {
        STORAGE_CLASSES: _class_update_causes,
        CSI_DRIVERS: _driver_update_causes,
        PERSISTENT_VOLUMES: _volume_update_causes,
        PERSISTENT_VOLUME_CLAIMS: _claim_update_causes,
    }
    causes = checks[resource](old, new) if resource in checks else []
    if causes:
        raise invalid(resource.kind, new["metadata"].get("name", ""), causes)


def storage_of(quantities: Any) -> Decimal | None:
    """The `storage` entry of a resource list, as a value."""
    if not isinstance(quantities, dict) or "storage" not in quantities:
        return None
    return quantity.parse(quantities["storage"])[0]


def claim_class(claim: dict[str, Any]) -> str:
    return str(claim.get("spec", {}).get("storageClassName") or "")


def _class_causes(obj: dict[str, Any]) -> Causes:
    causes: Causes = []
    if not obj.get("provisioner"):
        causes.append(("provisioner", "Required value"))
    if obj.get("reclaimPolicy") not in ("Delete", "Retain"):
        causes.append(
            (
                "reclaimPolicy",
                f'Unsupported value: "{obj.get("reclaimPolicy")}": '
                'supported values: "Delete", "Retain"',
            )
        )
    if obj.get("volumeBindingMode") not in ("Immediate", "WaitForFirstConsumer"):
        causes.append(("volumeBindingMode", "Unsupported value"))
    parameters = obj.get("parameters") or {}
    if not isinstance(parameters, dict) or not all(isinstance(v, str) for v in parameters.values()):
        causes.append(("parameters", "Invalid value: values must be strings"))
    return causes


def _class_update_causes(old: dict[str, Any], new: dict[str, Any]) -> Causes:
    causes: Causes = []
    for field in ("parameters", "provisioner", "reclaimPolicy"):
        if old.get(field) != new.get(field):
            causes.append((field, f"Forbidden: updates to {field} are forbidden."))
    if old.get("volumeBindingMode") != new.get("volumeBindingMode"):
        causes.append(("volumeBindingMode", "Invalid value: field is immutable"))
    return causes


def _driver_causes(obj: dict[str, Any]) -> Causes:
    name = obj["metadata"].get("name", "")
    if len(name) > 63:
        return [("metadata.name", "Too long: must have at most 63 bytes")]
    modes = obj["spec"].get("volumeLifecycleModes") or []
    if any(mode not in ("Persistent", "Ephemeral") for mode in modes):
        return [("spec.volumeLifecycleModes", "Unsupported value")]
    return []


def _driver_update_causes(old: dict[str, Any], new: dict[str, Any]) -> Causes:
    return [
        (f"spec.{field}", "Invalid value: field is immutable")
        for field in ("attachRequired", "volumeLifecycleModes")
        if old["spec"].get(field) != new["spec"].get(field)
    ]


def _volume_causes(obj: dict[str, Any]) -> Causes:
    spec = obj.get("spec") or {}
    causes = _access_mode_causes(spec.get("accessModes"), "spec.accessModes")
    capacity = storage_of(spec.get("capacity"))
    if capacity is None:
        causes.append(("spec.capacity", "Required value"))
    elif capacity <= 0:
        causes.append(("spec.capacity[storage]", "Invalid value: must be greater than zero"))
    sources = [name for name in _VOLUME_SOURCES if spec.get(name) is not None]
    if not sources:
        causes.append(("spec", "Required value: must specify a volume type"))
    elif len(sources) > 1:
        causes.append((f"spec.{sources[1]}", "Forbidden: may not specify more than 1 volume type"))
    csi = spec.get("csi")
    if isinstance(csi, dict):
        causes += [
            (f"spec.csi.{f}", "Required value")
            for f in ("driver", "volumeHandle")
            if not csi.get(f)
        ]
        if csi.get("driver") and not _CSI_DRIVER_NAME.fullmatch(str(csi["driver"])):
            causes.append(
                (
                    "spec.csi.driver",
                    "Invalid value: a CSI driver name must consist of alphanumeric characters, "
                    "'-', '_' or '.', and must start and end with an alphanumeric character "
                    "(at most 63)",
                )
            )
    if spec.get("persistentVolumeReclaimPolicy") not in RECLAIM_POLICIES:
        causes.append(("spec.persistentVolumeReclaimPolicy", "Unsupported value"))
    return causes


def _volume_update_causes(old: dict[str, Any], new: dict[str, Any]) -> Causes:
    causes: Causes = []
    before, after = old.get("spec") or {}, new.get("spec") or {}
    if any(before.get(name) != after.get(name) for name in _VOLUME_SOURCES):
        causes.append(
            (
                "spec.persistentvolumesource",
                "Forbidden: spec.persistentvolumesource is immutable after creation",
            )
        )
    if before.get("volumeMode") != after.get("volumeMode"):
        causes.append(("volumeMode", "Invalid value: field is immutable"))
    if before.get("nodeAffinity") is not None and before["nodeAffinity"] != after.get(
        "nodeAffinity"
    ):
        causes.append(("nodeAffinity", "Invalid value: field is immutable"))
    return causes


def _claim_causes(obj: dict[str, Any]) -> Causes:
    spec = obj.get("spec") or {}
    causes = _access_mode_causes(spec.get("accessModes"), "spec.accessModes")
    request = storage_of((spec.get("resources") or {}).get("requests"))
    if request is None:
        causes.append(("spec.resources[storage]", "Required value"))
    elif request <= 0:
        causes.append(("spec.resources[storage]", "Invalid value: must be greater than zero"))
    return causes + _claim_status_causes(obj.get("status") or {})


def _claim_status_causes(status: dict[str, Any]) -> Causes:
    causes: Causes = []
    for name in status.get("allocatedResources") or {}:
        if name != "storage":
            causes.append(("status.allocatedResources", f'Unsupported value: "{name}"'))
    for name, state in (status.get("allocatedResourceStatuses") or {}).items():
        if name != "storage" or state not in RESIZE_STATUSES:
            causes.append(
                (f"status.allocatedResourceStatuses[{name}]", f'Unsupported value: "{state}"')
            )
    return causes


def _claim_update_causes(old: dict[str, Any], new: dict[str, Any]) -> Causes:
    before, after = copy.deepcopy(old.get("spec") or {}), copy.deepcopy(new.get("spec") or {})
    if not before.get("volumeName"):  # set once, by the binder
        before.pop("volumeName", None)
        after.pop("volumeName", None)
    old_size = storage_of(before.get("resources", {}).get("requests")) or Decimal(0)
    new_size = storage_of(after.get("resources", {}).get("requests")) or Decimal(0)
    if (new.get("status") or {}).get("phase") == "Bound":
        after.setdefault("resources", {}).setdefault("requests", {})
        after["resources"]["requests"]["storage"] = before["resources"]["requests"]["storage"]
    causes: Causes = []
    if before != after:
        causes.append(
            (
                "spec",
                "Forbidden: spec is immutable after creation except resources.requests and "
                "volumeAttributesClassName for bound claims",
            )
        )
    capacity = storage_of((old.get("status") or {}).get("capacity"))
    if new_size < old_size and capacity is not None and new_size <= capacity:
        causes.append(
            (
                "spec.resources.requests.storage",
                "Forbidden: field can not be less than status.capacity",
            )
        )
    return causes


def _access_mode_causes(modes: Any, where: str) -> Causes:
    if not isinstance(modes, list) or not modes:
        return [(where, "Required value: at least 1 access mode is required")]
    causes: Causes = [
        (where, f'Unsupported value: "{mode}"') for mode in modes if mode not in ACCESS_MODES
    ]
    if "ReadWriteOncePod" in modes and len(set(modes)) > 1:
        causes.append((where, "Forbidden: may not use ReadWriteOncePod with other access modes"))
    return causes


def _dig(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)  # type: ignore[assignment]
    return obj
