"""PersistentVolumeClaims as RunPod network volumes: the provisioner's decisions
(docs/architecture.md §3, "Cloud resources").

The reconciler is the external provisioner of StorageClasses whose provisioner is
`runpod.io/network-volume`: a claim the PV controller hands to it (its
`volume.kubernetes.io/storage-provisioner` names us) gets a network volume and a
PersistentVolume bound to it; a released PV with reclaim `Delete` loses its volume once
no instance mounts it (RunPod refuses before), then the PV; a grown claim PATCHes the
volume's size. The CSI driver is `network-volume.runpod.io`: a CSI driver's name is a
DNS subdomain, so it cannot be the provisioner's `runpod.io/network-volume`.

A claim is held from before its volume's POST until a PV names it: our finalizer, and
the reclaim policy of its class recorded on it, in one patch. A claim deleted meanwhile
(even across a crash, even with the database lost) stays until its volume, if RunPod
made one, has its PV; then it goes, the PV controller releases the PV and the recorded
policy decides: Delete, the volume is deleted (no pod can have written to it: a pod
mounts only a bound claim); Retain, it stays with its Released PV. This is what
external-provisioner does with a volume made for a claim deleted while it provisions
(it makes the PV anyway); the hold closes the gap it leaves when it restarts between
the two, as its maintainers proposed (kubernetes-csi/external-provisioner#486).

Names, marks, sizes and the PV object: `core.resources.volume_objects`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from reconciler.core.actions import (
    ClaimEvent,
    ClaimRef,
    CreateNetworkVolume,
    CreateVolumeObject,
    DeleteNetworkVolume,
    DeleteVolumeObject,
    MarkClaimSelected,
    ReleaseClaim,
    ResizeNetworkVolume,
)
from reconciler.core.domain import (
    KubeObject,
    RunPodVolume,
)
from reconciler.core.pods.podinfo import parse_time
from reconciler.core.printable import quoted
from reconciler.core.reasons import VolumeNotice
from reconciler.core.resources.volume_objects import (
    MAX_GB,
    MIN_GB,
    PROVISIONER,
    PROVISIONING_FINALIZER,
    RECLAIM_ANNOTATION,
    REQUESTED_AT_ANNOTATION,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
    VOLUME_NAME_ANNOTATION,
    VOLUME_TYPES,
    StorageView,
    claim_uid_of,
    class_name,
    is_deleting,
    is_our_class,
    mounted,
    persistent_volume,
    pod_uid,
    reclaim_policy,
    requested,
    requested_gb,
    size_gb,
    volume_handle,
    volume_name,
)


def needs_listing(view: StorageView) -> bool:
    """Whether this tick must list RunPod's volumes: a claim to provision, a volume to
    grow or to delete (each depends on what exists there, and whose it is)."""
    return (
        any(
            is_deleting(claim) or (cls is not None and _refusal(view, claim, cls) is None)
            for claim, cls in _to_provision(view)
        )
        or any(True for _ in _released(view))
        or any(True for _ in _grown(view))
    )


def plan_volumes(view: StorageView) -> list[Any]:
    actions: list[Any] = []
    classes = {c["metadata"]["name"]: c for c in view.classes}
    for claim in view.claims:
        cls = classes.get(class_name(claim))
        selecting = _select(view, claim, cls)
        actions += selecting
        if selecting and cls is not None:
            # Why it cannot be placed is said at once, not a tick later once selected.
            actions += _refusal_event(view, claim, cls)
    for claim, cls in _to_provision(view):
        actions += _provision(view, claim, cls)
    actions += _releases(view)
    actions += _resizes(view)
    for pv in _released(view):
        actions += _reclaim(view, pv)
    return actions


def unlisted(view: StorageView) -> list[str]:
    """The volumes this tick's decisions depend on (a released PV's to delete, a grown
    claim's to resize) that the list omits: each is read by id, since the list lags
    behind creates and only RunPod's 404 says a volume is gone."""
    listed = {v.id for v in view.listed or ()}
    needed = [
        *(volume_handle(pv) for pv in _released(view)),
        *(volume_handle(pv) for _, pv, _ in _grown(view)),
    ]
    return sorted({h for h in needed if h and h not in listed}) if view.listed is not None else []


def leaks(view: StorageView) -> list[RunPodVolume]:
    """Listed volumes of ours that no PV names and no claim still waits for: kept (data
    is never deleted on a guess), reported."""
    named = {volume_handle(pv) for pv in view.volumes}
    waiting = {c["metadata"]["uid"] for c in view.claims if not c["spec"].get("volumeName")}
    return [
        v
        for v in view.listed or ()
        if v.id not in named and claim_uid_of(v, view.owner_id) not in (None, *waiting)
    ]


# --- provisioning ---------------------------------------------------------------------


def _to_provision(view: StorageView) -> Iterable[tuple[KubeObject, KubeObject | None]]:
    """Claims the PV controller handed to us that have no PV yet, and deleted claims we
    hold (their class may be gone: what their PV needs is recorded on them)."""
    classes = {c["metadata"]["name"]: c for c in view.classes}
    bound = {(pv["spec"].get("claimRef") or {}).get("uid") for pv in view.volumes}
    for claim in view.claims:
        meta = claim["metadata"]
        cls = classes.get(class_name(claim))
        if claim["spec"].get("volumeName") or meta["uid"] in bound:
            continue
        if is_deleting(claim):
            if _held(view, claim):
                yield claim, cls
        elif (
            is_our_class(cls)
            and (meta.get("annotations") or {}).get(STORAGE_PROVISIONER) == PROVISIONER
            and not _waits_for_a_consumer(view, claim, cls)
            and not _held_by_another(view, claim)
        ):
            yield claim, cls


def _provision(view: StorageView, claim: KubeObject, cls: KubeObject | None) -> list[Any]:
    ref = ClaimRef.of(claim)
    if is_deleting(claim):
        return _settle_deleted(view, claim, cls)
    assert cls is not None  # _to_provision yields live claims of our classes only
    refusal = _refusal(view, claim, cls)
    if refusal is not None and _placed_by_a_consumer_gone(view, claim, cls):
        return [MarkClaimSelected(ref, None)]
    if refusal is not None:
        return _refusal_event(view, claim, cls)
    if view.listed is None:
        return []
    name = volume_name(view.owner_id, ref.uid)
    existing = [v for v in view.listed if v.name == name]
    if existing:
        return [CreateVolumeObject(ref, persistent_volume(claim, cls, existing[0], view.node_name))]
    if _requested_lately(view, claim):
        return []  # its POST may have made it: the list lags behind creates
    size, datacenter = requested_gb(claim), _datacenter(view, claim, cls)
    kind = (cls.get("parameters") or {}).get("type") or None
    assert datacenter is not None  # _refusal said so
    hold = _hold(claim, cls, name, view.now)
    return [
        CreateNetworkVolume(ref, name, size, datacenter, kind, claim, cls, view.node_name, hold)
    ]


def _refusal_event(view: StorageView, claim: KubeObject, cls: KubeObject) -> list[Any]:
    refusal = _refusal(view, claim, cls)
    if refusal is None:
        return []
    return [ClaimEvent(ClaimRef.of(claim), VolumeNotice.PROVISIONING_FAILED, refusal, warning=True)]


def _settle_deleted(view: StorageView, claim: KubeObject, cls: KubeObject | None) -> list[Any]:
    """A held claim deleted before a PV named it: RunPod's volume, if the POST made one,
    gets its PV (bound to the claim: the PV controller releases it once the claim goes,
    and its reclaim policy acts); without one, the claim is let go."""
    if view.listed is None:
        return []
    ref = ClaimRef.of(claim)
    name = volume_name(view.owner_id, ref.uid)
    existing = [v for v in view.listed if v.name == name]
    if existing:
        return [CreateVolumeObject(ref, persistent_volume(claim, cls, existing[0], view.node_name))]
    if _requested_lately(view, claim):
        return []  # its POST may have made it: the list lags behind creates
    return [ReleaseClaim(ref, _release(claim), unmade=True)]


def _releases(view: StorageView) -> list[Any]:
    """Held claims that a PV names: the hold has done its work."""
    named = {(pv["spec"].get("claimRef") or {}).get("uid") for pv in view.volumes}
    return [
        ReleaseClaim(ClaimRef.of(claim), _release(claim))
        for claim in view.claims
        if _held(view, claim) and claim["metadata"]["uid"] in named
    ]


def _held(view: StorageView, claim: KubeObject) -> bool:
    """Held by this reconciler: another one (another virtual node) names its own volume."""
    meta = claim["metadata"]
    return PROVISIONING_FINALIZER in (meta.get("finalizers") or ()) and (
        meta.get("annotations") or {}
    ).get(VOLUME_NAME_ANNOTATION) == volume_name(view.owner_id, meta["uid"])


def _held_by_another(view: StorageView, claim: KubeObject) -> bool:
    """Held by another reconciler (another virtual node of the account): its POST may
    have made the volume its hold names, so the claim is left to it, as a dead writer's
    create is waited for rather than made twice. An Immediate claim is seen by every
    reconciler; overwriting the hold made a second volume that no PV would ever name."""
    meta = claim["metadata"]
    named = (meta.get("annotations") or {}).get(VOLUME_NAME_ANNOTATION)
    held = PROVISIONING_FINALIZER in (meta.get("finalizers") or ())
    return held and named is not None and named != volume_name(view.owner_id, meta["uid"])


def _hold(claim: KubeObject, cls: KubeObject, name: str, now: datetime | None) -> KubeObject:
    """The patch that holds a claim before its volume's POST: our finalizer, the
    class's reclaim policy, the volume's name and when it is asked for, on the version
    of the claim the tick read (a claim changed or deleted since is refused, and the
    POST not sent). Written again before each POST: the time is that of the last."""
    meta = claim["metadata"]
    finalizers = [f for f in meta.get("finalizers") or () if f != PROVISIONING_FINALIZER]
    annotations = {RECLAIM_ANNOTATION: reclaim_policy(claim, cls), VOLUME_NAME_ANNOTATION: name}
    if now is not None:
        annotations[REQUESTED_AT_ANNOTATION] = now.isoformat()
    return {
        "metadata": {
            "resourceVersion": meta["resourceVersion"],
            "finalizers": [*finalizers, PROVISIONING_FINALIZER],
            "annotations": annotations,
        }
    }


def _requested_lately(view: StorageView, claim: KubeObject) -> bool:
    """A claim we hold whose volume was POSTed less than the create grace ago: RunPod's
    list lags behind creates, and RunPod names no volume it made for a lost answer, so
    only time tells (as for an instance's in-doubt create). The time is on the claim,
    not in the database, which a crash may take with it. Unreadable, or ahead of the
    clock (an edit), it holds nothing back: the rule then is the one without it."""
    if view.now is None or not _held(view, claim):
        return False
    try:
        asked = parse_time(
            (claim["metadata"].get("annotations") or {}).get(REQUESTED_AT_ANNOTATION)
        )
    except ValueError:
        return False
    if asked is None or asked.tzinfo is None or asked > view.now:
        return False
    return view.now - asked < timedelta(seconds=view.create_grace_time)


def _release(claim: KubeObject) -> KubeObject:
    meta = claim["metadata"]
    rest = [f for f in meta.get("finalizers") or () if f != PROVISIONING_FINALIZER]
    return {"metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": rest or None}}


def _refusal(view: StorageView, claim: KubeObject, cls: KubeObject) -> str | None:
    """Why RunPod cannot hold this claim's volume (told without asking RunPod), or None."""
    size = requested_gb(claim)
    if not MIN_GB <= size <= MAX_GB:
        return (
            f"asks for {requested(claim)} ({size} GB in RunPod's GB of 10^9 bytes); a RunPod "
            f"network volume holds {MIN_GB} to {MAX_GB} GB"
        )
    name = cls["metadata"]["name"]
    if (cls.get("parameters") or {}).get("type") not in (None, "", *VOLUME_TYPES):
        return f"StorageClass {name}: parameters.type must be one of {', '.join(VOLUME_TYPES)}"
    datacenter = _datacenter(view, claim, cls)
    if datacenter is None:
        return (
            "no data center: no pod that uses the claim has an offer in RunPod's catalog "
            "that names one (the pod's own reason says why); set parameters.dataCenter on "
            f"StorageClass {name}, or runpod.io/datacenter-ids on the pod that uses the claim"
        )
    if (
        len(datacenter) > 32
        or not _DATACENTER_ID.fullmatch(datacenter)
        or (view.datacenters and datacenter not in view.datacenters)
    ):
        source = (cls.get("parameters") or {}).get("dataCenter")
        where = f"StorageClass {name}'s parameters.dataCenter" if source else "the data center"
        return f"{where} {quoted(datacenter)} is no data center RunPod's catalog names"
    return None


# RunPod's data center ids (EU-RO-1, US-TX-3, CA-MTL-1): letters, digits and dashes.
_DATACENTER_ID = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*")


def _datacenter(view: StorageView, claim: KubeObject, cls: KubeObject) -> str | None:
    """The class's data center, else the first its first consumer (or the node) allows:
    the first it names, else the one of its best offer."""
    named = _named_datacenter(view, claim, cls)
    if named is not None:
        return named
    consumers = _consumers(view, claim, placing=True)
    return next((view.offered[uid] for uid in map(pod_uid, consumers) if uid in view.offered), None)


def _named_datacenter(view: StorageView, claim: KubeObject, cls: KubeObject) -> str | None:
    named = (cls.get("parameters") or {}).get("dataCenter")
    if named:
        return str(named)
    for pod in _consumers(view, claim, placing=True):
        wanted = (pod["metadata"].get("annotations") or {}).get("runpod.io/datacenter-ids", "")
        first = next((dc.strip() for dc in wanted.split(",") if dc.strip()), None)
        if first:
            return first
    return view.datacenter_ids[0] if view.datacenter_ids else None


def unplaced_consumers(view: StorageView) -> list[KubeObject]:
    """The consumers of each unbound claim of ours that nothing names a data center
    for: their best offers decide (`StorageView.offered`)."""
    classes = {c["metadata"]["name"]: c for c in view.classes}
    found: dict[str, KubeObject] = {}
    for claim in view.claims:
        cls = classes.get(class_name(claim))
        if (
            cls is not None
            and is_our_class(cls)
            and not claim["spec"].get("volumeName")
            and not is_deleting(claim)
            and _named_datacenter(view, claim, cls) is None
        ):
            found.update((pod_uid(pod), pod) for pod in _consumers(view, claim, placing=True))
    return list(found.values())


def _waits_for_a_consumer(view: StorageView, claim: KubeObject, cls: KubeObject | None) -> bool:
    """A WaitForFirstConsumer claim not selected for this virtual node: for none yet (or
    taken back), or for another node, whose provisioner it is."""
    annotations = claim["metadata"].get("annotations") or {}
    return (
        cls is not None
        and cls.get("volumeBindingMode") == "WaitForFirstConsumer"
        and annotations.get(SELECTED_NODE) != view.node_name
    )


def _placed_by_a_consumer_gone(view: StorageView, claim: KubeObject, cls: KubeObject) -> bool:
    """A selected WaitForFirstConsumer claim whose data center only a consumer could
    give, and none is left (deleted before the volume was made): nothing to place it
    by until the next one comes."""
    return (
        cls.get("volumeBindingMode") == "WaitForFirstConsumer"
        and _datacenter(view, claim, cls) is None
        and not any(True for _ in _consumers(view, claim, placing=True))
    )


def _select(view: StorageView, claim: KubeObject, cls: KubeObject | None) -> list[Any]:
    """A WaitForFirstConsumer claim used by a pod of the virtual node: the node is
    selected, as the scheduler does for the pods it places (ours bypass it)."""
    annotations = claim["metadata"].get("annotations") or {}
    if (
        not is_our_class(cls)
        or cls is None
        or cls.get("volumeBindingMode") != "WaitForFirstConsumer"
        or SELECTED_NODE in annotations
        or claim["spec"].get("volumeName")
        or not any(True for _ in _consumers(view, claim))
    ):
        return []
    return [MarkClaimSelected(ClaimRef.of(claim), view.node_name)]


# --- expansion ------------------------------------------------------------------------


def _grown(view: StorageView) -> Iterable[tuple[KubeObject, KubeObject, int]]:
    """(claim, PV, GB asked) for each bound claim of ours asking more than its PV holds."""
    claims = {c["metadata"]["uid"]: c for c in view.claims}
    for pv in view.made_by_us:
        claim = claims.get((pv["spec"].get("claimRef") or {}).get("uid"))
        if claim is None or pv["status"].get("phase") != "Bound":
            continue
        request = ((claim["spec"].get("resources") or {}).get("requests") or {}).get("storage")
        want = size_gb(str(request or "0"))
        if want > size_gb(str(pv["spec"]["capacity"]["storage"])):
            yield claim, pv, want


def _resizes(view: StorageView) -> list[Any]:
    actions: list[Any] = []
    for claim, pv, want in _grown(view) if view.listed is not None else ():
        ref = ClaimRef.of(claim)
        if want > MAX_GB:
            why = f"cannot grow to {want} GB: a RunPod network volume holds at most {MAX_GB} GB"
            actions.append(ClaimEvent(ref, VolumeNotice.RESIZE_FAILED, why, warning=True))
        elif not _ours(view, volume_handle(pv)):
            why = f"volume {volume_handle(pv)} is not one the reconciler made: it is never resized"
            actions.append(ClaimEvent(ref, VolumeNotice.RESIZE_FAILED, why, warning=True))
        else:
            actions.append(
                ResizeNetworkVolume(ref, volume_handle(pv), want, pv["metadata"]["name"])
            )
    return actions


# --- reclaiming -----------------------------------------------------------------------


def _released(view: StorageView) -> Iterable[KubeObject]:
    for pv in view.made_by_us:
        if (
            pv["status"].get("phase") == "Released"
            and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete"
        ):
            yield pv


def _reclaim(view: StorageView, pv: KubeObject) -> list[Any]:
    """Delete the volume (ours only) once nothing mounts it, then the PV."""
    if view.listed is None:
        return []
    volume_id, name = volume_handle(pv), pv["metadata"]["name"]
    if not any(v.id == volume_id for v in view.listed):
        # Gone already (a crash after its DELETE) only on RunPod's 404 by id; unread
        # (its GET failed), the PV waits: dropping it would leave the volume billing.
        return [DeleteVolumeObject(name)] if volume_id in view.gone else []
    if not _ours(view, volume_id) or mounted(volume_id, view.instances):
        return []  # not ours: kept; mounted: RunPod would refuse, a later tick deletes
    return [DeleteNetworkVolume(volume_id, name)]


def _ours(view: StorageView, volume_id: str) -> bool:
    return any(
        v.id == volume_id and claim_uid_of(v, view.owner_id) is not None for v in view.listed or ()
    )


def awaits_placing_pods(view: StorageView) -> bool:
    """A claim the scheduler selected for this node, not bound, with no consumer here:
    the pod it is placing must be read to provision it."""
    return any(
        (c["metadata"].get("annotations") or {}).get(SELECTED_NODE) == view.node_name
        and not c["spec"].get("volumeName")
        and not any(True for _ in _consumers(view, c))
        for c in view.claims
    )


def _consumers(view: StorageView, claim: KubeObject, placing: bool = False) -> Iterable[KubeObject]:
    """The pods of the node that use the claim; with `placing`, also those the scheduler
    is placing (for a claim it selected for this node)."""
    meta = claim["metadata"]
    for pod in (*view.pods, *view.placing) if placing else view.pods:
        if pod["metadata"].get("namespace") != meta["namespace"]:
            continue
        for volume in pod.get("spec", {}).get("volumes") or ():
            if (volume.get("persistentVolumeClaim") or {}).get("claimName") == meta["name"]:
                yield pod
                break
