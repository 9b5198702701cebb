"""The controllers and admission plugins around PersistentVolumes, as a cluster runs them
(pkg/controller/volume/persistentvolume, .../pvcprotection, .../pvprotection and
plugin/pkg/admission/storage, Kubernetes 1.32), acting at once on every write.

- Admission: a new claim gets the `kubernetes.io/pvc-protection` finalizer, a new PV
  `kubernetes.io/pv-protection`. A claim's storage request may grow only while it is
  Bound and only if its class allows expansion (403 otherwise: the resize plugin).
- Binding (the PV controller). An unbound claim binds to a PV whose `claimRef` names it
  (a provisioner's PV, or one made by hand), else to an Available PV of its class that
  is large enough with its access modes. A claim of a `WaitForFirstConsumer` class waits
  for the scheduler's `volume.kubernetes.io/selected-node`; then, with no PV to take,
  a class whose provisioner is external gets it named in
  `volume.kubernetes.io/storage-provisioner` (and the beta key): the provisioner's cue.
  Binding writes the PV's `claimRef` and phase Bound, the claim's `volumeName`,
  `pv.kubernetes.io/bind-completed: "yes"`, `pv.kubernetes.io/bound-by-controller: "yes"`
  where the controller chose, and phase Bound with the PV's capacity (only when it
  becomes Bound: growing it later is the resizer's write). A claim whose PV is gone is
  Lost.
- A PV whose claim is gone (or was replaced: another UID) is Released and stays so;
  deleting a released PV with reclaim `Delete` is its external provisioner's work.
- Protection: a claim being deleted keeps its finalizer while a pod that has not ended
  mounts it; a PV being deleted keeps its finalizer while Bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.sim.kube.resources import (
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    STORAGE_CLASSES,
    Resource,
)
from reconciler.sim.kube.select import Selector
from reconciler.sim.kube.status import ApiError
from reconciler.sim.kube.storage import claim_class, storage_of

if TYPE_CHECKING:
    from reconciler.sim.kube.store import Store

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
MERGE_PATCH = "application/merge-patch+json"
_WATCHED = (PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS, STORAGE_CLASSES)
# Writes settle in a few rounds (bind the PV, then the claim, then a finalizer goes).
_ROUNDS = 5


@dataclass(frozen=True)
class _Volumes:
    """The PVs as of one store version, looked up by the claim they name; the claim
    controller reads them for every claim on every sync."""

    version: int
    by_claim: dict[tuple[str | None, str | None], list[dict[str, Any]]]
    unclaimed: list[dict[str, Any]]


class VolumeControllers:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._volumes: _Volumes | None = None

    # Admission

    def admit(self, resource: Resource, obj: dict[str, Any]) -> None:
        finalizer = {PERSISTENT_VOLUME_CLAIMS: PVC_PROTECTION, PERSISTENT_VOLUMES: PV_PROTECTION}
        if resource in finalizer:
            finalizers = obj["metadata"].setdefault("finalizers", [])
            if finalizer[resource] not in finalizers:
                finalizers.append(finalizer[resource])

    def admit_update(self, resource: Resource, old: dict[str, Any], new: dict[str, Any]) -> None:
        if resource is not PERSISTENT_VOLUME_CLAIMS:
            return
        before = storage_of(old["spec"].get("resources", {}).get("requests")) or 0
        after = storage_of(new["spec"].get("resources", {}).get("requests")) or 0
        if after <= before:
            return
        name = new["metadata"]["name"]
        if (old.get("status") or {}).get("phase") != "Bound":
            raise _forbidden(name, "Only bound persistent volume claims can be expanded")
        cls = self._class(claim_class(old))
        if cls is None or not cls.get("allowVolumeExpansion"):
            raise _forbidden(
                name,
                "only dynamically provisioned pvc can be resized and "
                "the storageclass that provisions the pvc must support resize",
            )

    # Controllers

    def react(self, resource: Resource, obj: dict[str, Any]) -> None:
        if resource in _WATCHED:
            self.sync()

    def sync(self) -> None:
        for _ in range(_ROUNDS):
            before = self.store.resource_version
            for claim in self._all(PERSISTENT_VOLUME_CLAIMS):
                self._sync_claim(claim)
            for volume in self._all(PERSISTENT_VOLUMES):
                self._sync_volume(volume)
            if self.store.resource_version == before:
                return

    def _sync_claim(self, claim: dict[str, Any]) -> None:
        meta = claim["metadata"]
        if _held_by(meta, PVC_PROTECTION) and not self._in_use(claim):
            self._drop_finalizer(PERSISTENT_VOLUME_CLAIMS, claim, PVC_PROTECTION)
            return
        name = claim["spec"].get("volumeName")
        if not name:
            self._sync_unbound(claim)
            return
        volume = self._find(PERSISTENT_VOLUMES, None, name)
        if volume is None:
            bound_before = (meta.get("annotations") or {}).get(BIND_COMPLETED)
            self._set_phase(PERSISTENT_VOLUME_CLAIMS, claim, "Lost" if bound_before else "Pending")
            return
        ref = volume["spec"].get("claimRef")
        if ref is None or _names(ref, claim):
            self._bind(volume, claim)

    def _sync_unbound(self, claim: dict[str, Any]) -> None:
        annotations = claim["metadata"].get("annotations") or {}
        cls = self._class(claim_class(claim))
        delayed = cls is not None and cls.get("volumeBindingMode") == "WaitForFirstConsumer"
        volume = self._prebound(claim)
        if volume is None and not (delayed and SELECTED_NODE not in annotations):
            volume = self._matching(claim)
        if volume is not None:
            self._bind(volume, claim)
        elif cls is not None and not (delayed and SELECTED_NODE not in annotations):
            provisioner = str(cls.get("provisioner", ""))
            if annotations.get(STORAGE_PROVISIONER) != provisioner:
                self._patch(
                    PERSISTENT_VOLUME_CLAIMS,
                    claim,
                    {"metadata": {"annotations": _provisioner_annotations(provisioner)}},
                )

    def _sync_volume(self, volume: dict[str, Any]) -> None:
        meta = volume["metadata"]
        if _held_by(meta, PV_PROTECTION) and volume.get("status", {}).get("phase") != "Bound":
            self._drop_finalizer(PERSISTENT_VOLUMES, volume, PV_PROTECTION)
            return
        ref = volume["spec"].get("claimRef")
        if ref is None:
            self._set_phase(PERSISTENT_VOLUMES, volume, "Available")
            return
        claim = self._find(PERSISTENT_VOLUME_CLAIMS, ref.get("namespace"), ref.get("name", ""))
        if claim is not None and _names(ref, claim):
            return  # the claim's sync binds it
        if ref.get("uid"):
            if volume.get("status", {}).get("phase") != "Failed":
                self._set_phase(PERSISTENT_VOLUMES, volume, "Released")
        else:
            self._set_phase(PERSISTENT_VOLUMES, volume, "Available")

    def _bind(self, volume: dict[str, Any], claim: dict[str, Any]) -> None:
        claim_meta = claim["metadata"]
        ref = {
            "kind": "PersistentVolumeClaim",
            "namespace": claim_meta["namespace"],
            "name": claim_meta["name"],
            "uid": claim_meta["uid"],
            "apiVersion": "v1",
            "resourceVersion": claim_meta["resourceVersion"],
        }
        old_ref = volume["spec"].get("claimRef")
        if old_ref is None or old_ref.get("uid") != claim_meta["uid"]:
            patch: dict[str, Any] = {"spec": {"claimRef": ref}}
            if old_ref is None:
                patch["metadata"] = {"annotations": {BOUND_BY_CONTROLLER: "yes"}}
            volume = self._patch(PERSISTENT_VOLUMES, volume, patch)
        self._set_phase(PERSISTENT_VOLUMES, volume, "Bound")
        annotations = dict(claim_meta.get("annotations") or {})
        spec_patch: dict[str, Any] = {}
        if claim["spec"].get("volumeName") != volume["metadata"]["name"]:
            spec_patch = {"volumeName": volume["metadata"]["name"]}
            annotations[BOUND_BY_CONTROLLER] = "yes"
        annotations[BIND_COMPLETED] = "yes"
        if spec_patch or annotations != (claim_meta.get("annotations") or {}):
            claim = self._patch(
                PERSISTENT_VOLUME_CLAIMS,
                claim,
                {"metadata": {"annotations": annotations}, "spec": spec_patch},
            )
        if claim.get("status", {}).get("phase") != "Bound":
            status = {
                "phase": "Bound",
                "accessModes": volume["spec"].get("accessModes"),
                "capacity": volume["spec"].get("capacity"),
            }
            self._patch(PERSISTENT_VOLUME_CLAIMS, claim, {"status": status}, "status")

    def _prebound(self, claim: dict[str, Any]) -> dict[str, Any] | None:
        meta = claim["metadata"]
        for volume in self._indexed().by_claim.get((meta.get("namespace"), meta["name"]), ()):
            ref = volume["spec"]["claimRef"]
            if _names(ref, claim) and not volume["metadata"].get("deletionTimestamp"):
                return volume
        return None

    def _indexed(self) -> _Volumes:
        """The PVs indexed once per store version, not searched once per claim: a sync
        goes over every claim, and runs on every write of a claim, PV or pod."""
        version = self.store.resource_version
        if self._volumes is None or self._volumes.version != version:
            by_claim: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}
            unclaimed = []
            for volume in self._all(PERSISTENT_VOLUMES):
                ref = volume["spec"].get("claimRef")
                if ref is None:
                    unclaimed.append(volume)
                else:
                    by_claim.setdefault((ref.get("namespace"), ref.get("name")), []).append(volume)
            self._volumes = _Volumes(version, by_claim, unclaimed)
        return self._volumes

    def _matching(self, claim: dict[str, Any]) -> dict[str, Any] | None:
        """The smallest Available PV of the claim's class that fits it."""
        spec = claim["spec"]
        wanted = storage_of(spec.get("resources", {}).get("requests")) or 0
        fitting = [
            volume
            for volume in self._indexed().unclaimed
            if not volume["metadata"].get("deletionTimestamp")
            and str(volume["spec"].get("storageClassName") or "") == claim_class(claim)
            and set(spec.get("accessModes") or []) <= set(volume["spec"].get("accessModes") or [])
            and (storage_of(volume["spec"].get("capacity")) or 0) >= wanted
        ]
        return min(fitting, key=lambda v: storage_of(v["spec"]["capacity"]) or 0, default=None)

    def _in_use(self, claim: dict[str, Any]) -> bool:
        namespace, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
        for pod in self._all(PODS):
            if pod["metadata"].get("namespace") != namespace:
                continue
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for volume in pod.get("spec", {}).get("volumes") or []:
                if (volume.get("persistentVolumeClaim") or {}).get("claimName") == name:
                    return True
        return False

    def _class(self, name: str) -> dict[str, Any] | None:
        return self._find(STORAGE_CLASSES, None, name) if name else None

    def _set_phase(self, resource: Resource, obj: dict[str, Any], phase: str) -> None:
        if obj.get("status", {}).get("phase") != phase:
            self._patch(resource, obj, {"status": {"phase": phase}}, "status")

    def _drop_finalizer(self, resource: Resource, obj: dict[str, Any], finalizer: str) -> None:
        remaining = [f for f in obj["metadata"]["finalizers"] if f != finalizer]
        self._patch(resource, obj, {"metadata": {"finalizers": remaining or None}})

    def _patch(
        self, resource: Resource, obj: dict[str, Any], patch: dict[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.store.patch(
            resource, meta.get("namespace"), meta["name"], MERGE_PATCH, patch, sub
        )

    def _find(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        entry = self.store.find(resource, namespace, name)
        return entry.obj if entry is not None else None

    def _all(self, resource: Resource) -> list[dict[str, Any]]:
        return [entry.obj for entry in self.store.list_page(resource, None, Selector()).items]


def _held_by(meta: dict[str, Any], finalizer: str) -> bool:
    """Being deleted, and only this finalizer's controller can let it go."""
    return bool(meta.get("deletionTimestamp")) and finalizer in (meta.get("finalizers") or [])


def _names(ref: dict[str, Any], claim: dict[str, Any]) -> bool:
    """Whether a claimRef points at this claim (by name, and by UID once it has one)."""
    meta = claim["metadata"]
    return (
        ref.get("namespace") == meta.get("namespace")
        and ref.get("name") == meta["name"]
        and ref.get("uid") in (None, "", meta["uid"])
    )


def _provisioner_annotations(provisioner: str) -> dict[str, str]:
    return {STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner}


def _forbidden(name: str, why: str) -> ApiError:
    return ApiError(
        403,
        f'persistentvolumeclaims "{name}" is forbidden: {why}',
        "Forbidden",
        {"name": name, "kind": "persistentvolumeclaims"},
    )
