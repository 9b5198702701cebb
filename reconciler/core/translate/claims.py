"""A pod's PersistentVolumeClaims of network volumes, as its instance mounts them.

RunPod mounts one network volume per instance, at a path of the container's. A claim
whose PV is a network volume of ours (CSI driver `network-volume.runpod.io`) becomes
that mount, at the `mountPath` of the chosen container's `volumeMounts` entry, and pins
the instance to the volume's data center. What RunPod cannot do is a reason, never a
silent drop: two such claims, a claim not bound yet (the pod waits), a claim that is
not there. Claims of other storage are left as they were (no instance mounts them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.core.domain import KubeObject, NetworkVolume
from reconciler.core.reasons import PodReason
from reconciler.core.translate.errors import TranslationError

CSI_DRIVER = "network-volume.runpod.io"
DATACENTER_LABEL = "topology.runpod.io/data-center"


@dataclass(frozen=True)
class ClaimMount:
    volume: NetworkVolume
    datacenter: str
    claim: str


def claim_names(pod: KubeObject) -> list[str]:
    """The claims the pod's volumes name, in order."""
    return [
        str(v["persistentVolumeClaim"]["claimName"])
        for v in pod.get("spec", {}).get("volumes") or ()
        if isinstance(v, dict) and (v.get("persistentVolumeClaim") or {}).get("claimName")
    ]


def claim_mount(
    pod: KubeObject,
    container: KubeObject,
    claims: Mapping[str, KubeObject | None],
    volumes: Mapping[str, KubeObject | None],
) -> ClaimMount | None:
    """The network volume the pod's claims give its instance; `claims` by claim name and
    `volumes` (PVs) by PV name are what the engine read for them."""
    mounts = [m for m in _network_claims(pod, container, claims, volumes) if m is not None]
    if len(mounts) > 1:
        raise TranslationError(
            PodReason.UNSUPPORTED_VOLUMES,
            f"claims {', '.join(m.claim for m in mounts)} are network volumes: a RunPod "
            "instance mounts one network volume at most",
            permanent=True,
        )
    return mounts[0] if mounts else None


def _network_claims(
    pod: KubeObject,
    container: KubeObject,
    claims: Mapping[str, KubeObject | None],
    volumes: Mapping[str, KubeObject | None],
) -> list[ClaimMount | None]:
    found: list[ClaimMount | None] = []
    for volume in pod.get("spec", {}).get("volumes") or ():
        name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if not name:
            continue
        claim = claims.get(name)
        if claim is None:
            raise TranslationError(
                PodReason.CLAIM_NOT_BOUND,
                f'persistentvolumeclaim "{name}" not found',
                permanent=False,
            )
        bound = claim.get("spec", {}).get("volumeName")
        pv = volumes.get(bound) if bound else None
        if pv is None or (claim.get("status") or {}).get("phase") != "Bound":
            raise TranslationError(
                PodReason.CLAIM_NOT_BOUND,
                f'persistentvolumeclaim "{name}" is not bound to a volume yet',
                permanent=False,
            )
        found.append(_mount(name, volume.get("name", ""), pv, container))
    return found


def _mount(claim: str, volume: str, pv: KubeObject, container: KubeObject) -> ClaimMount | None:
    csi = pv.get("spec", {}).get("csi") or {}
    if csi.get("driver") != CSI_DRIVER:
        return None
    paths = [
        m.get("mountPath")
        for m in container.get("volumeMounts") or ()
        if isinstance(m, dict) and m.get("name") == volume
    ]
    if not paths or not str(paths[0]).startswith("/"):
        raise TranslationError(
            PodReason.UNSUPPORTED_VOLUMES,
            f'claim "{claim}" is a network volume the container does not mount at an '
            "absolute path (volumeMounts)",
            permanent=True,
        )
    attributes = csi.get("volumeAttributes") or {}
    labels = pv.get("metadata", {}).get("labels") or {}
    datacenter = str(attributes.get("dataCenter") or labels.get(DATACENTER_LABEL) or "")
    return ClaimMount(NetworkVolume(str(csi.get("volumeHandle")), str(paths[0])), datacenter, claim)
