"""A claim deleted while its volume is being made (between the volume's POST and its PV,
across a crash) leaves no leak and no duplicate: the claim is held by the provisioner's
finalizer from before the POST until a PV names it, so the next tick finds the volume
by its name, makes its PV (bound to the deleted claim, as external-provisioner does),
lets the claim go, and the PV controller releases the PV: the reclaim policy recorded
on the claim at provisioning decides (Delete: the volume and the PV go; Retain: both
stay, the PV Released). A crash before the POST lets the claim go with nothing made."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reconciler.core.resources.volume_objects import (
    PROVISIONING_FINALIZER,
    RECLAIM_ANNOTATION,
    volume_name,
)
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.tick.resources.sections import VolumeSection
from reconciler.sim.kube.resources import PERSISTENT_VOLUME_CLAIMS, STORAGE_CLASSES

from .crashing import crash_in
from .test_claims import add_claim, add_class, claim, pv_of, volume_calls


def delete(box: Sandbox, name: str = "ckpt") -> None:
    box.kube_sim.store.delete(PERSISTENT_VOLUME_CLAIMS, "default", name)


def posts(box: Sandbox) -> list[Any]:
    return [c for c in volume_calls(box) if c[0] == "POST"]


@pytest.mark.parametrize("policy", ["Delete", "Retain"])
def test_a_claim_deleted_between_the_post_and_the_pv_follows_its_recorded_policy(box, policy):
    add_class(box, reclaimPolicy=policy)
    add_class(box, "other")  # a class of ours stays: the provisioner runs
    made = add_claim(box)
    crash_in(box, "after-volume-create")
    [volume_id] = box.runpod_sim.volumes
    held = claim(box)
    assert PROVISIONING_FINALIZER in held["metadata"]["finalizers"]
    assert held["metadata"]["annotations"][RECLAIM_ANNOTATION] == policy
    delete(box)
    box.kube_sim.store.delete(STORAGE_CLASSES, None, "runpod")  # the record is what counts
    assert claim(box)["metadata"]["deletionTimestamp"]  # held: still there
    box.tick()  # its PV is made, bound to the deleted claim
    pv = pv_of(box, made)
    assert pv["spec"]["csi"]["volumeHandle"] == volume_id
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == policy
    box.tick()  # the hold goes, and with it the claim; the PV is released
    assert claim(box) is None
    box.tick()  # Delete: the volume, then the PV
    if policy == "Delete":
        assert box.runpod_sim.volumes == {} and pv_of(box, made) is None
    else:
        assert list(box.runpod_sim.volumes) == [volume_id]
        assert pv_of(box, made)["status"]["phase"] == "Released"
    add_claim(box, "again", cls="other")  # a tick that lists the volumes: no leak
    assert VolumeSection.of(box.tick()).leaks == []
    assert len(posts(box)) == 2  # one volume per claim


@pytest.mark.parametrize("record", [None, "", "delete", "Recycle", "Delete "])
def test_a_missing_or_garbled_record_with_its_class_gone_keeps_the_volume(box, record):
    """Only a record that says exactly `Delete` deletes data; anything else is Retain."""
    add_class(box, reclaimPolicy="Delete")
    add_class(box, "other")
    made = add_claim(box)
    crash_in(box, "after-volume-create")
    [volume_id] = box.runpod_sim.volumes
    held = claim(box)
    if record is None:
        del held["metadata"]["annotations"][RECLAIM_ANNOTATION]
    else:
        held["metadata"]["annotations"][RECLAIM_ANNOTATION] = record
    box.kube_sim.put("persistentvolumeclaims", held)
    delete(box)
    box.kube_sim.store.delete(STORAGE_CLASSES, None, "runpod")
    for _ in range(3):
        box.tick()
    assert pv_of(box, made)["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert list(box.runpod_sim.volumes) == [volume_id]
    assert not [c for c in volume_calls(box) if c[0] == "DELETE"]


def test_a_claim_deleted_before_the_post_goes_with_nothing_made(box):
    add_class(box)
    add_claim(box)
    crash_in(box, "after-volume-intent")
    delete(box)
    assert claim(box) is not None  # held
    box.tick()  # the POST may have gone and the list may lag: the claim waits
    assert claim(box) is not None
    box.advance(box.settings.timing.create_grace_time)
    box.tick()  # RunPod has no volume under its name: the claim is let go
    assert claim(box) is None
    assert box.runpod_sim.volumes == {} and posts(box) == []


@pytest.mark.parametrize("point", ["after-volume-unused", "after-volume-delete"])
def test_a_crash_while_the_deleted_claims_volume_is_deleted_leaves_nothing(box, point):
    add_class(box)
    made = add_claim(box)
    crash_in(box, "after-volume-create")
    delete(box)
    box.tick()  # its PV
    box.tick()  # released
    crash_in(box, point)
    box.tick()
    assert box.runpod_sim.volumes == {} and pv_of(box, made) is None
    assert len([c for c in volume_calls(box) if c[0] == "DELETE"]) == 1
    assert len(posts(box)) == 1


def test_a_claim_that_changed_before_its_hold_is_not_posted_for(box):
    add_class(box)
    add_claim(box)
    box.kube_sim.inject_fault("PATCH", "/api/v1/namespaces/*/persistentvolumeclaims/*", 409, 1)
    box.tick()  # the hold is refused: no POST
    assert posts(box) == []
    box.tick()
    assert len(posts(box)) == 1
    assert claim(box)["status"]["phase"] == "Bound"
    name = volume_name(box.settings.owner_id, claim(box)["metadata"]["uid"])
    assert posts(box)[0][2]["name"] == name


def test_another_reconcilers_claims_are_left_to_it(box):
    """Two virtual nodes in one cluster: a claim selected for the other node, and a
    deleted claim the other reconciler holds, are neither provisioned nor let go here."""
    add_class(box, "late", volumeBindingMode="WaitForFirstConsumer")
    add_claim(box, "theirs", cls="late")
    selected = claim(box, "theirs")
    selected["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "other-node"}
    box.kube_sim.put("persistentvolumeclaims", selected)
    add_class(box)
    held = add_claim(box, "held")
    uid = held["metadata"]["uid"]
    held["metadata"]["finalizers"] = [PROVISIONING_FINALIZER]
    held["metadata"]["annotations"] = {
        "runpod.io/network-volume-name": volume_name("other/owner", uid)
    }
    box.kube_sim.put("persistentvolumeclaims", held)
    delete(box, "held")
    box.tick()
    box.tick()
    assert claim(box, "theirs")["status"]["phase"] == "Pending"
    assert claim(box, "held")["metadata"]["finalizers"] == [PROVISIONING_FINALIZER]
    assert posts(box) == []


def test_a_deleted_claim_stays_held_while_a_dead_writers_volume_may_be_listed(box: Sandbox) -> None:
    """A writer died just after the volume's POST, the claim was deleted, and RunPod's
    list lags past the create grace: the absence proves nothing while the dead writer's
    hold on creates lasts, so the claim stays held; once the list shows the volume, its
    PV is made and the recorded policy deletes it. No volume is left billing."""
    grace = box.settings.timing.create_grace_time
    box.runpod_sim.account.set_listing_lag(grace * 3)
    add_class(box)
    made = add_claim(box)
    crash_in(box, "after-volume-create")
    delete(box)
    box.engine.hooks = replace(box.engine.hooks, creates_held=lambda: True)
    box.advance(grace * 2)
    box.tick()
    assert claim(box) is not None  # still held
    box.engine.hooks = replace(box.engine.hooks, creates_held=lambda: False)
    box.advance(grace * 2)
    for _ in range(3):
        box.tick()
    assert claim(box) is None
    assert box.runpod_sim.volumes == {} and pv_of(box, made) is None
    assert len(posts(box)) == 1
