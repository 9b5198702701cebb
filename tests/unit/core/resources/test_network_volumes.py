"""The network volumes' pure decisions, without a simulator: what a released PV's volume
becomes (deleted once ours and unmounted, its PV dropped only on RunPod's 404, kept when
it is another's or retained), a grown claim's resize, the reclaim policy a claim gets,
a claim's size in RunPod's GB, and the leak audit (a duplicate collected after the
grace, a volume whose claim is gone kept)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.core.actions import (
    ClaimEvent,
    DeleteNetworkVolume,
    DeleteVolumeObject,
    ResizeNetworkVolume,
)
from reconciler.core.domain import Instance, InstanceStatus, KubeObject, RunPodVolume
from reconciler.core.resources import network_volumes, volume_leaks
from reconciler.core.resources.volume_objects import (
    CSI_DRIVER,
    PROVISIONED_BY,
    PROVISIONER,
    RECLAIM_ANNOTATION,
    StorageView,
    claim_uid_of,
    reclaim_policy,
    size_gb,
    volume_name,
)

OWNER = "cluster/virtual-runpod"
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def claim(uid: str = "c1", storage: str = "20G", volume: str = "") -> KubeObject:
    spec: dict[str, object] = {
        "storageClassName": "runpod",
        "resources": {"requests": {"storage": storage}},
    }
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"name": f"data-{uid}", "namespace": "ml", "uid": uid}, "spec": spec}


def pv(claim_uid: str, handle: str, phase: str, policy: str = "Delete", size: str = "20G"):
    return {
        "metadata": {
            "name": f"pvc-{claim_uid}",
            "annotations": {PROVISIONED_BY: PROVISIONER},
            "creationTimestamp": (NOW - timedelta(hours=2)).isoformat(),
        },
        "spec": {
            "csi": {"driver": CSI_DRIVER, "volumeHandle": handle},
            "claimRef": {"uid": claim_uid, "namespace": "ml", "name": f"data-{claim_uid}"},
            "persistentVolumeReclaimPolicy": policy,
            "capacity": {"storage": size},
        },
        "status": {"phase": phase},
    }


def ours(volume_id: str, claim_uid: str = "c1", size: int = 20) -> RunPodVolume:
    return RunPodVolume(volume_id, volume_name(OWNER, claim_uid), size, "EU-RO-1")


def view(pvs=(), listed=(), claims=(), instances=(), gone=frozenset()) -> StorageView:
    return StorageView(
        (), claims, pvs, (), instances, OWNER, "virtual-runpod", listed=listed, gone=gone
    )


def mounting(volume_id: str) -> Instance:
    return Instance("i1", "train", InstanceStatus.RUNNING, network_volume_id=volume_id)


def test_a_released_pvs_volume_of_ours_nothing_mounts_is_deleted_then_its_pv() -> None:
    planned = network_volumes.plan_volumes(view([pv("c1", "v1", "Released")], listed=[ours("v1")]))
    assert planned == [DeleteNetworkVolume("v1", "pvc-c1")]


def test_a_mounted_retained_or_foreign_volume_is_kept() -> None:
    released = [pv("c1", "v1", "Released")]
    assert (
        network_volumes.plan_volumes(view(released, [ours("v1")], instances=[mounting("v1")])) == []
    )
    retained = [pv("c1", "v1", "Released", policy="Retain")]
    assert network_volumes.plan_volumes(view(retained, [ours("v1")])) == []
    foreign = RunPodVolume("v1", volume_name("another/owner", "c1"), 20, "EU-RO-1")
    assert network_volumes.plan_volumes(view(released, [foreign])) == []


def test_an_unlisted_volume_lets_its_pv_go_only_on_runpods_404() -> None:
    released = [pv("c1", "v1", "Released")]
    assert network_volumes.plan_volumes(view(released, [], gone=frozenset({"v1"}))) == [
        DeleteVolumeObject("pvc-c1")
    ]
    # Omitted by the list but not read as gone (the GET failed, or the list lags): kept.
    assert network_volumes.plan_volumes(view(released, [])) == []


def test_a_grown_claim_resizes_its_volume_of_ours_and_only_that() -> None:
    grown = claim(storage="30G", volume="pvc-c1")
    bound = [pv("c1", "v1", "Bound")]
    planned = network_volumes.plan_volumes(view(bound, [ours("v1")], claims=[grown]))
    assert planned == [ResizeNetworkVolume(planned[0].claim, "v1", 30, "pvc-c1")]
    foreign = RunPodVolume("v1", "someone-elses", 20, "EU-RO-1")
    refused = network_volumes.plan_volumes(view(bound, [foreign], claims=[grown]))
    assert [type(a) for a in refused] == [ClaimEvent]
    same = claim(storage="20G", volume="pvc-c1")
    assert network_volumes.plan_volumes(view(bound, [ours("v1")], claims=[same])) == []


def test_the_reclaim_policy_is_the_classs_and_the_claims_record_never_overrides_it() -> None:
    recorded = claim()
    recorded["metadata"]["annotations"] = {RECLAIM_ANNOTATION: "Delete"}
    assert reclaim_policy(recorded, {"reclaimPolicy": "Retain"}) == "Retain"
    assert reclaim_policy(recorded, None) == "Delete"
    assert reclaim_policy(claim(), None) == "Retain"
    assert reclaim_policy(claim(), {}) == "Delete"


def test_a_claims_size_is_rounded_up_to_runpods_whole_gb() -> None:
    assert size_gb("10G") == 10
    assert size_gb("10Gi") == 11  # 10.74 GB: never fewer bytes than asked
    assert size_gb("10000000001") == 11
    assert size_gb("1") == 1


def test_a_volumes_name_tells_its_claim_only_to_its_owner() -> None:
    volume = ours("v1", "claim-uid")
    assert claim_uid_of(volume, OWNER) == "claim-uid"
    assert claim_uid_of(volume, "another/owner") is None


def test_a_duplicate_is_collected_after_the_grace_a_volume_whose_claim_is_gone_is_kept() -> None:
    bound = claim("c1", volume="pvc-c1")
    storage = view([pv("c1", "v1", "Bound")], claims=[bound])
    known = [
        volume_leaks.KnownVolume(ours("v1"), NOW - timedelta(days=1)),
        volume_leaks.KnownVolume(ours("v2", "c1"), NOW - timedelta(minutes=10)),
        volume_leaks.KnownVolume(ours("v3", "gone-claim"), NOW - timedelta(days=1)),
    ]
    leaks = {leak.volume.id: leak for leak in volume_leaks.found(known, storage)}
    assert sorted(leaks) == ["v2", "v3"]  # v1 is the one its PV names
    assert leaks["v2"].duplicate and not leaks["v3"].duplicate
    # The grace counts from the bound volume's PV (two hours ago), not the first list.
    assert leaks["v2"].since == NOW - timedelta(hours=2)
    found = list(leaks.values())
    assert volume_leaks.collect(found, storage, NOW, 3600) == [DeleteNetworkVolume("v2", None)]
    assert volume_leaks.collect(found, storage, NOW, 3 * 3600) == []
    mounted = view([pv("c1", "v1", "Bound")], claims=[bound], instances=[mounting("v2")])
    assert volume_leaks.collect(found, mounted, NOW, 3600) == []
