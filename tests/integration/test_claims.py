"""PersistentVolumeClaims of a `runpod.io/network-volume` StorageClass, provisioned by
the reconciler through both simulators: one POST per volume, sized in RunPod's whole GB
(10^9 bytes) and named for its claim, a PV bound to the claim; the volume list read only
on ticks with a claim to provision or a volume to delete, nothing on a steady tick; a
crash between the POST and the PV adopts the volume by its name instead of making a
second; a released volume deleted (reclaim Delete) only once no instance mounts it,
kept with Retain, never when it is not ours; a grown claim grows its volume; a claim
outside RunPod's sizes is told why and waits."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.resources.volume_objects import (
    CSI_DRIVER,
    PROVISIONER,
    PROVISIONING_FINALIZER,
    SELECTED_NODE,
    volume_name,
)
from reconciler.core.translate.offers import ranked_offers
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.process.metrics import Metrics
from reconciler.runtime.tick.resources.sections import VolumeSection
from reconciler.sim.kube.resources import PERSISTENT_VOLUME_CLAIMS

from .crashing import crash_in
from .test_limits import status_reason

VOLUMES = "/v2/network-volumes"


def volume_calls(box: Sandbox) -> list[tuple[str, str, Any]]:
    return [
        (r.method, r.path, r.body) for r in box.runpod_sim.requests if r.path.startswith(VOLUMES)
    ]


def add_class(box: Sandbox, name: str = "runpod", **fields: Any) -> None:
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": PROVISIONER,
        "parameters": {"dataCenter": "EU-RO-1"},
        **fields,
    }
    box.kube_sim.put("storageclasses", body)


def add_claim(box: Sandbox, name: str = "ckpt", size: str = "20Gi", cls: str = "runpod") -> Any:
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": size}},
            "storageClassName": cls,
        },
    }
    return box.kube_sim.put("persistentvolumeclaims", body)


def claim(box: Sandbox, name: str = "ckpt") -> Any:
    return box.kube_sim.get("persistentvolumeclaims", "default", name)


def provision(box: Sandbox) -> None:
    """Two ticks: the volume and its PV, then the claim's hold taken off."""
    box.tick()
    box.tick()
    assert PROVISIONING_FINALIZER not in claim(box)["metadata"].get("finalizers", [])


def pv_of(box: Sandbox, made: Any) -> Any:
    return box.kube_sim.get("persistentvolumes", None, f"pvc-{made['metadata']['uid']}")


def test_a_claim_gets_one_volume_and_a_bound_pv_and_a_steady_tick_costs_nothing(box):
    add_class(box)
    made = add_claim(box)
    box.tick()
    [(_, _, body)] = [c for c in volume_calls(box) if c[0] == "POST"]
    name = volume_name(box.settings.owner_id, made["metadata"]["uid"])
    assert body == {"name": name, "size": 22, "dataCenter": "EU-RO-1"}  # 20Gi = 21.5 GB
    assert [c[0] for c in volume_calls(box)] == ["GET", "POST"]
    pv = pv_of(box, made)
    assert pv["spec"]["csi"]["driver"] == CSI_DRIVER
    [volume] = box.runpod_sim.volumes.values()
    assert pv["spec"]["csi"]["volumeHandle"] == volume["id"]
    assert pv["metadata"]["labels"]["topology.runpod.io/data-center"] == "EU-RO-1"
    bound = claim(box)
    assert (bound["status"]["phase"], bound["status"]["capacity"]) == ("Bound", {"storage": "22G"})
    reasons = [e["reason"] for e in box.kube_sim.list("events", "default")]
    assert "ProvisioningSucceeded" in reasons
    before = len(volume_calls(box))
    box.tick()
    box.tick()
    assert len(volume_calls(box)) == before  # steady: not a request


def test_a_volumes_create_is_journaled_with_the_id_runpod_gave_it(box):
    """The journal records what a create made, a network volume's as an instance's: the
    create's steps say which id of RunPod's answer it is."""
    add_class(box)
    made = add_claim(box)
    box.tick()
    [volume] = box.runpod_sim.volumes.values()
    [entry] = [e for e in box.store.journal() if e.kind == "create-network-volume"]
    assert (entry.pod_uid, entry.resource_id, entry.outcome) == (
        made["metadata"]["uid"],
        volume["id"],
        "ok",
    )


@pytest.mark.parametrize("point", ["after-volume-intent", "after-volume-create"])
def test_a_crash_while_provisioning_leaves_one_volume(box, point):
    add_class(box)
    made = add_claim(box)
    crash_in(box, point)
    box.tick()
    if point == "after-volume-intent":  # the POST may have gone: waited for, not made again
        assert box.runpod_sim.volumes == {}
        box.advance(box.settings.timing.create_grace_time)
        box.tick()
    assert len(box.runpod_sim.volumes) == 1
    assert claim(box)["status"]["phase"] == "Bound"
    assert pv_of(box, made)["spec"]["csi"]["volumeHandle"] in box.runpod_sim.volumes
    box.tick()
    assert len(box.runpod_sim.volumes) == 1


def test_a_claim_outside_runpods_sizes_is_told_why_and_waits(box):
    add_class(box)
    add_claim(box, size="5Gi")
    box.tick()
    assert [c for c in volume_calls(box) if c[0] == "POST"] == []
    [event] = [
        e for e in box.kube_sim.list("events", "default") if e["reason"] == "ProvisioningFailed"
    ]
    assert "10 to 4096 GB" in event["message"]
    assert claim(box)["status"]["phase"] == "Pending"


@pytest.mark.parametrize("running", [True, False])
def test_a_released_volume_goes_only_once_no_instance_mounts_it(box, running):
    """A stopped instance (EXITED) holds its volume as a running one does: RunPod would
    refuse the DELETE, so it is not even asked, on any tick."""
    add_class(box)
    made = add_claim(box)
    provision(box)
    [volume_id] = box.runpod_sim.volumes
    holder = box.runpod_sim.add_instance("someone", running=running)
    fields: dict[str, Any] = {"mounts": {"network": [{"volumeId": volume_id, "path": "/w"}]}}
    if not running:
        fields["desiredStatus"] = "EXITED"
    box.runpod_sim.set_instance_fields(holder, fields)
    delete_claim(box)
    assert pv_of(box, made)["status"]["phase"] == "Released"
    for _ in range(3):
        box.tick()
    assert volume_id in box.runpod_sim.volumes  # mounted: not even asked
    assert not [c for c in volume_calls(box) if c[0] == "DELETE"]
    box.runpod_sim.vanish(holder)
    box.tick()
    assert volume_id not in box.runpod_sim.volumes
    assert pv_of(box, made) is None


def test_retain_keeps_the_volume_and_its_pv(box):
    add_class(box, reclaimPolicy="Retain")
    made = add_claim(box)
    provision(box)
    delete_claim(box)
    box.tick()
    assert len(box.runpod_sim.volumes) == 1
    assert pv_of(box, made)["status"]["phase"] == "Released"


def test_a_volume_that_is_not_ours_is_never_deleted_or_resized(box):
    add_class(box, allowVolumeExpansion=True)
    foreign = box.runpod_sim.add_volume("someone-elses", 50, "EU-RO-1")
    made = add_claim(box, size="50G")
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{made['metadata']['uid']}",
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": "50G"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "runpod",
            "claimRef": {"namespace": "default", "name": "ckpt", "uid": made["metadata"]["uid"]},
            "csi": {"driver": CSI_DRIVER, "volumeHandle": foreign.id},
        },
    }
    box.kube_sim.put("persistentvolumes", pv)
    assert claim(box)["status"]["phase"] == "Bound"
    grown = claim(box)
    grown["spec"]["resources"]["requests"]["storage"] = "80G"
    box.kube_sim.store.update(PERSISTENT_VOLUME_CLAIMS, "default", "ckpt", grown)
    box.tick()
    delete_claim(box)
    box.tick()
    box.tick()
    assert box.runpod_sim.volumes[foreign.id]["size"] == 50
    assert not [c for c in volume_calls(box) if c[0] in ("POST", "PATCH", "DELETE")]


def test_a_grown_claim_grows_its_volume(box):
    add_class(box, allowVolumeExpansion=True)
    add_claim(box)
    box.tick()
    grown = claim(box)
    grown["spec"]["resources"]["requests"]["storage"] = "40Gi"
    box.kube_sim.store.update(PERSISTENT_VOLUME_CLAIMS, "default", "ckpt", grown)
    box.tick()
    [volume] = box.runpod_sim.volumes.values()
    assert volume["size"] == 43
    assert claim(box)["status"]["capacity"] == {"storage": "43G"}
    [(_, _, patch)] = [c for c in volume_calls(box) if c[0] == "PATCH"]
    assert patch == {"size": 43}
    # Journaled as every call that changes a cloud resource: what was asked, of which
    # volume, for which claim, and how it ended.
    [entry] = [e for e in box.store.journal() if e.kind == "resize-network-volume"]
    assert (entry.pod_uid, entry.resource_id, entry.outcome) == (
        grown["metadata"]["uid"],
        volume["id"],
        "ok",
    )


def delete_claim(box: Sandbox) -> None:
    box.kube_sim.store.delete(PERSISTENT_VOLUME_CLAIMS, "default", "ckpt")


def claim_pod(box: Sandbox, name: str, *claims: str, **settings: Any) -> Any:
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    mounts = [{"name": c, "mountPath": f"/{c}"} for c in claims]
    pod = box.add_pod(name, extra_spec={"volumes": volumes}, **settings)
    pod["spec"]["containers"][0]["volumeMounts"] = mounts
    return box.kube_sim.put("pods", pod)


def test_a_checkpoint_written_by_one_pod_is_read_by_the_next(box, tmp_path):
    box.enable_ssh(str(tmp_path / "key"))
    add_class(box, volumeBindingMode="WaitForFirstConsumer")
    add_claim(box)
    writer = claim_pod(box, "writer", "ckpt")
    box.tick()  # the claim is selected for the virtual node, as the scheduler would
    box.tick()  # provisioned and bound
    box.tick()  # the pod is created on it
    [body] = [r.body for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods")]
    [volume_id] = box.runpod_sim.volumes
    assert body["mounts"] == {"network": [{"volumeId": volume_id, "path": "/ckpt"}]}
    assert body["dataCenterIds"] == ["EU-RO-1"]
    first = box.instance_for(writer)
    (box.runpod_sim.ssh.sandbox(first["id"]) / "ckpt" / "step-100").write_text("weights")
    box.kube_sim.delete_pod("default", "writer", grace_seconds=0)
    box.tick()
    reader = claim_pod(box, "reader", "ckpt")
    box.tick()
    second = box.instance_for(reader)
    assert second["id"] != first["id"]
    assert (box.runpod_sim.ssh.sandbox(second["id"]) / "ckpt" / "step-100").read_text() == "weights"


def test_what_runpod_cannot_mount_is_the_pods_reason(box):
    add_class(box, volumeBindingMode="WaitForFirstConsumer")
    add_claim(box, "a")
    add_claim(box, "b")
    claim_pod(box, "early", "a")
    claim_pod(box, "missing", "nope")
    box.tick()
    assert status_reason(box, "early") == "PersistentVolumeClaimNotBound"
    assert status_reason(box, "missing") == "PersistentVolumeClaimNotBound"
    claim_pod(box, "both", "a", "b")
    for _ in range(3):
        box.tick()
    pod = box.pod("both") or {}
    assert pod["status"]["reason"] == "UnsupportedVolumes"
    assert box.instance_for(pod) is None


@pytest.mark.parametrize("point", ["after-volume-unused", "after-volume-delete"])
def test_a_crash_while_deleting_leaves_neither_the_volume_nor_its_pv(box, point):
    add_class(box)
    made = add_claim(box)
    provision(box)
    delete_claim(box)
    crash_in(box, point)
    box.tick()
    assert box.runpod_sim.volumes == {}
    assert pv_of(box, made) is None
    assert len([c for c in volume_calls(box) if c[0] == "DELETE"]) == 1


def test_a_volume_of_ours_that_no_pv_names_is_reported_and_kept(box):
    add_class(box)
    stray = box.runpod_sim.add_volume(
        volume_name(box.settings.owner_id, "gone-claim"), 10, "EU-RO-1"
    )
    add_claim(box)  # a claim to provision: the tick lists the volumes
    report = box.tick()
    assert VolumeSection.of(report).leaks == [stray.id]
    metrics = Metrics()
    metrics.observe(report, None, box.settings.owner_id)
    assert metrics.registry.get_sample_value("reconciler_leaked_network_volumes") == 1
    assert stray.id in box.runpod_sim.volumes  # kept
    before = len(volume_calls(box))
    assert VolumeSection.of(box.tick()).leaks == [stray.id]  # told again, from the kept list
    assert len(volume_calls(box)) == before  # steady: not listed again
    # Its claim is gone, so it is no duplicate: past the orphan grace, and past the
    # hourly list that reads it again, it is still kept and still told.
    box.advance(box.settings.timing.orphan_grace_time + 3600)
    for _ in range(2):
        assert VolumeSection.of(box.tick()).leaks == [stray.id]
    assert stray.id in box.runpod_sim.volumes
    assert not [c for c in volume_calls(box) if c[0] == "DELETE"]


def test_a_claim_whose_consumer_went_before_its_volume_waits_for_the_next(box):
    """WaitForFirstConsumer, the data center from the consumer: the pod is deleted after
    the node was selected, before the volume was made. The selection is taken back
    (nothing to place the volume by), with no Event each tick; the next consumer gets it."""
    box.settings = box.settings.with_values(datacenter_ids=())
    add_class(box, volumeBindingMode="WaitForFirstConsumer", parameters={})
    add_claim(box)
    first = claim_pod(box, "first", "ckpt")
    first["metadata"]["annotations"] = {"runpod.io/datacenter-ids": "EU-RO-1"}
    box.kube_sim.put("pods", first)
    box.tick()  # selected for the virtual node
    assert SELECTED_NODE in claim(box)["metadata"]["annotations"]
    box.kube_sim.delete_pod("default", "first", grace_seconds=0)
    box.tick()
    assert SELECTED_NODE not in claim(box)["metadata"]["annotations"]
    events = len(box.kube_sim.list("events", "default"))
    box.tick()
    box.tick()
    assert len(box.kube_sim.list("events", "default")) == events  # quiet while it waits
    assert posts_of(box) == []
    second = claim_pod(box, "second", "ckpt")
    second["metadata"]["annotations"] = {"runpod.io/datacenter-ids": "EU-RO-1"}
    box.kube_sim.put("pods", second)
    box.tick()
    box.tick()
    assert claim(box)["status"]["phase"] == "Bound"
    assert len(posts_of(box)) == 1


def posts_of(box: Sandbox) -> list[Any]:
    return [c for c in volume_calls(box) if c[0] == "POST"]


def test_a_claim_the_scheduler_selected_is_provisioned_for_the_pod_it_is_placing(box):
    """The real scheduler's VolumeBinding: it selects the node on the claim and binds the
    pod only once the claim is bound, so the consumer has no node yet (seen on the real
    plane of tests/realk8s, where the claim was unselected every tick and the pod never
    ran). The pod it is placing gives the data center, and the selection stays."""
    box.settings = box.settings.with_values(datacenter_ids=())
    add_class(box, volumeBindingMode="WaitForFirstConsumer", parameters={})
    made = add_claim(box)
    made["metadata"].setdefault("annotations", {})[SELECTED_NODE] = box.settings.node.name
    box.kube_sim.put("persistentvolumeclaims", made)
    pod = claim_pod(box, "placing", "ckpt", bound=False)
    pod["metadata"]["annotations"] = {"runpod.io/datacenter-ids": "EU-RO-1"}
    box.kube_sim.put("pods", pod)
    provision(box)
    assert claim(box)["metadata"]["annotations"][SELECTED_NODE] == box.settings.node.name
    assert claim(box)["status"]["phase"] == "Bound"
    [post] = posts_of(box)
    assert post[2]["dataCenter"] == "EU-RO-1"


def provisioning_failures(box: Sandbox) -> list[Any]:
    return [
        e for e in box.kube_sim.list("events", "default") if e["reason"] == "ProvisioningFailed"
    ]


def test_a_claim_no_one_pins_takes_the_data_center_of_its_first_pods_best_offer(box):
    """The README's claim as written: the class names no data center, nor does the pod
    or the node; the volume is made where the pod's best offer is, and the pod runs
    there with it, with no warning on the way."""
    box.settings = box.settings.with_values(datacenter_ids=())
    add_class(box, volumeBindingMode="WaitForFirstConsumer", parameters={})
    add_claim(box)
    pod = claim_pod(box, "trainer", "ckpt")
    for _ in range(4):
        box.tick()
    [post] = posts_of(box)
    kept = box.store.catalogs.load("gpu")
    assert kept is not None
    best = ranked_offers(pod, None, kept[0], [], box.settings)[0]
    assert len(best.datacenter_ids) > 1  # so that "first" is a choice
    assert post[2]["dataCenter"] == best.datacenter_ids[0]
    instance = box.instance_for(pod)
    assert instance is not None
    [create] = [
        r.body for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods")
    ]
    assert create["dataCenterIds"] == [post[2]["dataCenter"]]
    assert (
        box.pod("trainer")["metadata"]["annotations"]["runpod.io/datacenter"]
        == (post[2]["dataCenter"])
    )
    assert provisioning_failures(box) == []
    # The catalog the pod's create reads serves the claim too: one fetch in all.
    assert [r.path for r in box.runpod_sim.requests].count("/v2/catalog/gpus") == 1


def test_a_storage_class_applied_after_start_is_seen_at_once(box):
    """A pod waits for its claim while no class exists; the class applied a moment
    later is read on the next tick, not after --catalog-ttl."""
    box.settings = box.settings.with_values(datacenter_ids=(), catalog_ttl=300)
    add_claim(box)
    claim_pod(box, "trainer", "ckpt")
    box.tick()
    box.tick()
    assert posts_of(box) == []
    add_class(box, volumeBindingMode="WaitForFirstConsumer", parameters={})
    box.advance(5)
    box.tick()
    box.tick()
    assert claim(box)["status"]["phase"] == "Bound"
    assert len(posts_of(box)) == 1


def test_a_claim_that_cannot_be_placed_says_why_once_on_the_first_tick(box):
    """No data center from the class, the pod or the node, and the pod fits no GPU
    type: the claim says why on the first tick, in one Event that does not count up
    each tick while nothing changes."""
    box.settings = box.settings.with_values(datacenter_ids=())
    add_class(box, volumeBindingMode="WaitForFirstConsumer", parameters={})
    add_claim(box)
    claim_pod(box, "huge", "ckpt", annotations={"runpod.io/required-gpu-memory": "640"})
    box.tick()
    [event] = provisioning_failures(box)
    assert "no data center" in event["message"], event
    for _ in range(5):
        box.advance(2)
        box.tick()
    [event] = provisioning_failures(box)
    assert event.get("count", 1) == 1, event
    assert posts_of(box) == []
