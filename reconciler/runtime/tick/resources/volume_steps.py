"""Carrying out the network-volume provisioner's actions (`core.resources.network_volumes`), each
RunPod call journaled as every side effect is (docs/architecture.md §3, "Cloud
resources"; §4).

The order makes a crash anywhere harmless: a claim is held (our finalizer) before its
volume is made, and the volume before its PV (a crash between leaves a volume of ours
that the next tick's list shows under the claim's name: its PV is made then, no second
volume, even if the claim was deleted meanwhile: the hold keeps it until then); the
hold goes once a PV names the claim. A volume is deleted before its PV (a crash
between leaves a released PV whose volume the list no longer shows: the PV goes then).
"""

from __future__ import annotations

import logging
from typing import Any, get_args

from reconciler.core.actions import (
    Action,
    ClaimEvent,
    ClaimRef,
    CreateNetworkVolume,
    CreateVolumeObject,
    DeleteNetworkVolume,
    DeleteVolumeObject,
    MarkClaimSelected,
    ReleaseClaim,
    ResizeNetworkVolume,
    VolumeAction,
)
from reconciler.core.domain import RunPodVolume
from reconciler.core.reasons import VolumeNotice
from reconciler.core.resources.volume_objects import SELECTED_NODE, persistent_volume
from reconciler.runtime.tick import crashpoints
from reconciler.runtime.tick.run_context import RunContext

log = logging.getLogger(__name__)


class VolumeSteps:
    actions: tuple[type[Action], ...] = get_args(VolumeAction)

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self.runpod, self.kube, self._journaled = context.runpod, context.kube, context.journaled

    def unrecorded(self) -> int:
        return 0  # the claim is held (our finalizer, the volume name) before the POST

    def apply(self, action: Action) -> None:
        match action:
            case CreateNetworkVolume():
                self._create(action)
            case CreateVolumeObject(claim=claim, volume=pv):
                self.kube.storage.create_volume(pv)
                log.info("made PV %s for the volume of claim %s", pv["metadata"]["name"], claim)
            case ResizeNetworkVolume():
                self._resize(action)
            case DeleteNetworkVolume(volume_id=volume_id, pv_name=pv_name):
                self._journaled(
                    "delete-network-volume",
                    None,
                    volume_id,
                    lambda: self.runpod.volumes.delete(volume_id),
                    durable_at="after-volume-unused",
                )
                crashpoints.reached("after-volume-delete")
                if pv_name is None:
                    log.info("deleted network volume %s, a duplicate no PV named", volume_id)
                    return
                self.kube.storage.delete_volume(pv_name)
                log.info("deleted network volume %s and its released PV %s", volume_id, pv_name)
            case DeleteVolumeObject(pv_name=pv_name):
                self.kube.storage.delete_volume(pv_name)
            case MarkClaimSelected(claim=claim, node_name=node):
                patch = {"metadata": {"annotations": {SELECTED_NODE: node}}}
                self.kube.storage.patch_claim(claim.namespace, claim.name, patch)
            case ReleaseClaim(claim=claim, patch=patch, unmade=unmade):
                if unmade and self.context.creates_held():
                    log.info("claim %s stays held: a dead writer's volume may yet be listed", claim)
                    return
                self.kube.storage.patch_claim(claim.namespace, claim.name, patch)
            case ClaimEvent(claim=claim, reason=reason, message=message, warning=warning):
                self._event(claim, reason, message, warning)

    def _create(self, action: CreateNetworkVolume) -> None:
        """As every create: not while a dead writer's create may still land (the list
        may lag past the claim's create grace), creates are stopped or the tick is past
        its deadline; the next tick plans it again, and its list may show the volume."""
        if self.context.creates_wait():
            self.context.deferred += 1
            return
        claim = action.claim
        if action.hold is not None:  # refused (the claim changed or went): no POST
            self.kube.storage.patch_claim(claim.namespace, claim.name, action.hold)
        made = self._journaled(
            "create-network-volume",
            action.claim.uid,
            None,
            lambda: self.runpod.volumes.create(
                action.name, action.size_gb, action.datacenter, action.type
            ),
            durable_at="after-volume-intent",
            made=lambda volume: volume.id,
        )
        assert isinstance(made, RunPodVolume)
        crashpoints.reached("after-volume-create")
        pv = persistent_volume(action.claim_object, action.storage_class, made, action.node_name)
        self.kube.storage.create_volume(pv)
        self._event(
            action.claim,
            VolumeNotice.PROVISIONED,
            f"network volume {made.id} ({made.size_gb} GB in {made.datacenter}) bound as "
            f"PV {pv['metadata']['name']}",
        )

    def _resize(self, action: ResizeNetworkVolume) -> None:
        self._journaled(
            "resize-network-volume",
            action.claim.uid,
            action.volume_id,
            lambda: self.runpod.volumes.resize(action.volume_id, action.size_gb),
        )
        size = f"{action.size_gb}G"
        self.kube.storage.patch_volume(action.pv_name, {"spec": {"capacity": {"storage": size}}})
        status: dict[str, Any] = {
            "capacity": {"storage": size},
            "allocatedResources": {"storage": size},
            "allocatedResourceStatuses": None,
            "conditions": None,
        }
        claim = action.claim
        self.kube.storage.patch_claim(claim.namespace, claim.name, {"status": status}, status=True)
        self._event(
            claim, VolumeNotice.RESIZED, f"network volume {action.volume_id} is now {size}B"
        )

    def _event(
        self, claim: ClaimRef, reason: VolumeNotice, message: str, warning: bool = False
    ) -> None:
        involved = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "metadata": {"namespace": claim.namespace, "name": claim.name, "uid": claim.uid},
        }
        self.kube.events.record(involved, reason.value, message, "Warning" if warning else "Normal")
