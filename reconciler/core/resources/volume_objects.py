"""Network volumes' names, marks and Kubernetes objects: what the provisioner
(`core.resources.network_volumes`) decides from (`StorageView`) and what it makes (the
PV), shared with the leak audit, the storage prices and the runtime.

Ours by name: `runpod-reconciler-<owner digest>-pvc-<claim UID>`. A volume whose create
answer was lost is found in the next list under that name and adopted (its PV made);
a volume without our name is never resized or deleted, whoever's PV names it.

Sizes: a claim asks in bytes, RunPod in whole GB (10-4096). RunPod does not say whether
its GB is 10^9 or 2^30 bytes; 10^9 is taken, the reading that can only round up.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from reconciler.core.domain import (
    REGISTRY_NAME_PREFIX,
    Instance,
    InstanceStatus,
    KubeObject,
    RunPodVolume,
)
from reconciler.core.quantity import quantity_value
from reconciler.core.tenancy import Marks, refusal

PROVISIONER = "runpod.io/network-volume"
CSI_DRIVER = "network-volume.runpod.io"
DATACENTER_LABEL = "topology.runpod.io/data-center"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONING_FINALIZER = "runpod.io/network-volume-provisioning"
RECLAIM_ANNOTATION = "runpod.io/reclaim-policy"
VOLUME_NAME_ANNOTATION = "runpod.io/network-volume-name"
REQUESTED_AT_ANNOTATION = "runpod.io/network-volume-requested-at"
MIN_GB, MAX_GB = 10, 4096
GB = 10**9
VOLUME_TYPES = ("STANDARD", "HIGH_PERFORMANCE")


@dataclass(frozen=True)
class StorageView:
    """What the provisioner decides from: the cluster's storage, and RunPod's volumes
    when they were listed this tick (`listed` None: not read)."""

    classes: Sequence[KubeObject]
    claims: Sequence[KubeObject]
    volumes: Sequence[KubeObject]
    """PersistentVolumes."""
    pods: Sequence[KubeObject]
    """Pods bound to the virtual node."""
    instances: Sequence[Instance]
    owner_id: str
    node_name: str
    datacenter_ids: tuple[str, ...] = ()
    listed: Sequence[RunPodVolume] | None = None
    gone: frozenset[str] = frozenset()
    """Volumes RunPod answered 404 for by id this tick (read because `listed` omitted
    them): the only proof a volume is gone, since the list lags behind creates."""
    datacenters: frozenset[str] = frozenset()
    """The data centers RunPod's catalog names, read with `listed` (empty: not known,
    then only the form of a data center's id is checked)."""
    now: datetime | None = None
    create_grace_time: float = 0.0
    """How long a held claim's POST may take to show its volume in the list."""
    placing: Sequence[KubeObject] = ()
    """Pending pods with no node yet, read only while a claim the scheduler selected for
    this node has no consumer on it: the scheduler binds such a pod only after its claims
    are bound, so until then they are the claim's consumers."""
    offered: Mapping[str, str] = field(default_factory=dict)
    """The data center of each consumer's best offer, by pod UID
    (`translate.offers.first_datacenter` over the cached catalog), for the consumers of
    claims whose data center neither their class, nor a pod, nor the node names
    (`unplaced_consumers`)."""

    @functools.cached_property
    def made_by_us(self) -> list[KubeObject]:
        """The PVs the provisioner made (`provisioned_by_us`), sorted out once per view: each
        reclaim and resize decision of every tick goes over them."""
        return [pv for pv in self.volumes if provisioned_by_us(pv)]


def volume_name(owner_id: str, claim_uid: str) -> str:
    return f"{_our_prefix(owner_id)}{claim_uid}"


def claim_uid_of(volume: RunPodVolume, owner_id: str) -> str | None:
    """The UID of the claim a volume of ours was made for; None: not ours."""
    prefix = _our_prefix(owner_id)
    return volume.name[len(prefix) :] if volume.name.startswith(prefix) else None


def _our_prefix(owner_id: str) -> str:
    return f"{REGISTRY_NAME_PREFIX}{hashlib.sha256(owner_id.encode()).hexdigest()[:8]}-pvc-"


def named_volume_refusal(
    volume_id: str, volumes: Sequence[RunPodVolume], owner_id: str, claim_uids: Iterable[str]
) -> str | None:
    """Why a pod may not mount the network volume its annotation names: only one the
    reconciler made for one of its namespace's claims (`claim_uids`), by RunPod's record
    of it (its name: our owner digest and the claim's UID). Any other volume is mounted
    through a PersistentVolume, which only an administrator can make. None: it may; a
    volume the list does not show is left to the translation's own reason."""
    listed = next((v for v in volumes if v.id == volume_id), None)
    if listed is None:
        return None
    claim_uid = claim_uid_of(listed, owner_id)
    marks = Marks(claim_uid is not None, claim_uid)
    return refusal("network volume", volume_id, marks, frozenset(claim_uids))


@functools.lru_cache(maxsize=1024)
def size_gb(request: str) -> int:
    """A claim's storage request in RunPod's whole GB, rounded up; ValueError if unreadable.
    Remembered: every tick compares each bound claim with its PV, in a few spellings."""
    return max(1, math.ceil(quantity_value(request) / Decimal(GB)))


def is_our_class(cls: KubeObject | None) -> bool:
    return cls is not None and cls.get("provisioner") == PROVISIONER


def is_our_volume_object(pv: KubeObject) -> bool:
    return (pv.get("spec", {}).get("csi") or {}).get("driver") == CSI_DRIVER


def mounted(volume_id: str, instances: Iterable[Instance]) -> list[str]:
    """Instances (anyone's: RunPod refuses the delete for any) that hold the volume."""
    return [
        i.id
        for i in instances
        if i.network_volume_id == volume_id and i.status is not InstanceStatus.TERMINATED
    ]


def is_deleting(claim: KubeObject) -> bool:
    return bool(claim["metadata"].get("deletionTimestamp"))


def reclaim_policy(claim: KubeObject, cls: KubeObject | None) -> str:
    """The class's; once the class is gone (a claim of an older reconciler), as recorded
    on the claim when its volume was asked for; with neither, Retain: data is never
    deleted on a guess. The claim's record never overrides its class: whoever may edit
    the claim could turn a class's Retain into Delete."""
    if cls is not None:
        return str(cls.get("reclaimPolicy") or "Delete")
    recorded = (claim["metadata"].get("annotations") or {}).get(RECLAIM_ANNOTATION)
    return "Delete" if recorded == "Delete" else "Retain"


def requested(claim: KubeObject) -> str:
    return str(((claim["spec"].get("resources") or {}).get("requests") or {}).get("storage", "0"))


def requested_gb(claim: KubeObject) -> int:
    return size_gb(requested(claim))


def pod_uid(pod: KubeObject) -> str:
    return str(pod["metadata"].get("uid", ""))


def persistent_volume(
    claim: KubeObject, cls: KubeObject | None, volume: RunPodVolume, node_name: str
) -> KubeObject:
    """The PV for a claim's volume, bound to the claim (the PV controller completes it)."""
    meta = claim["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "labels": {DATACENTER_LABEL: volume.datacenter},
            "annotations": {PROVISIONED_BY: PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": f"{volume.size_gb}G"},
            "accessModes": list(claim["spec"].get("accessModes") or ["ReadWriteMany"]),
            "persistentVolumeReclaimPolicy": reclaim_policy(claim, cls),
            "storageClassName": class_name(claim),
            "volumeMode": "Filesystem",
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "csi": {
                "driver": CSI_DRIVER,
                "volumeHandle": volume.id,
                "volumeAttributes": {"dataCenter": volume.datacenter, "type": volume.type},
            },
            # Only the virtual node can mount it: the scheduler places no consumer elsewhere.
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node_name],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def provisioned_by_us(pv: KubeObject) -> bool:
    """A PV as the provisioner makes them (whether its volume is ours, the list says)."""
    uid = (pv["spec"].get("claimRef") or {}).get("uid")
    return (
        is_our_volume_object(pv)
        and pv["metadata"]["name"] == f"pvc-{uid}"
        and (pv["metadata"].get("annotations") or {}).get(PROVISIONED_BY) == PROVISIONER
    )


def volume_handle(pv: KubeObject) -> str:
    return str((pv.get("spec", {}).get("csi") or {}).get("volumeHandle") or "")


def class_name(claim: KubeObject) -> str:
    return str(claim.get("spec", {}).get("storageClassName") or "")
