"""Network volumes on a gang, through both simulators: an Indexed Job whose pods mount a
claim of the `runpod.io/network-volume` StorageClass runs as one Instant Cluster in the
volume's data center with the volume at the mount path on every member (the create's
`mounts.network`, as the contract's `Mounts` allows); a WaitForFirstConsumer claim is
provisioned for the gang's pods as for a single pod's; and a gang whose volume lives
where RunPod has no cluster stock waits with a reason saying so, sending no POST."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.demo.sandbox import Sandbox

from .test_claims import add_claim, add_class, provision


def _members(box: Sandbox) -> list[dict[str, Any]]:
    return [p for p in box.runpod_sim.instances.values() if "cluster" in p]


def _cluster_posts(box: Sandbox) -> list[Any]:
    return [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]


def _gang_on_claim(box: Sandbox) -> None:
    box.add_indexed_job("train", 2, claim=("ckpt", "/ckpt"))
    box.tick()
    box.advance(30)
    box.tick()


def test_a_gang_mounts_its_claims_volume_on_every_member(box: Sandbox, tmp_path: Path) -> None:
    box.enable_ssh(str(tmp_path / "key"))  # members run sshd: their files can be looked at
    add_class(box)  # EU-RO-1
    add_claim(box)
    provision(box)
    [volume] = box.runpod_sim.volumes.values()
    _gang_on_claim(box)
    [post] = _cluster_posts(box)
    assert post.status == 201, post.body
    assert post.body["mounts"] == {"network": [{"volumeId": volume["id"], "path": "/ckpt"}]}
    assert post.body["dataCenterIds"] == ["EU-RO-1"]
    members = _members(box)
    assert len(members) == 2
    assert {m["dataCenterId"] for m in members} == {"EU-RO-1"}
    assert [p["status"]["phase"] for p in box.job_pods("train")] == ["Running", "Running"]
    # One volume at /ckpt on every member: what rank 0 writes, rank 1 reads.
    first, second = (m["id"] for m in members)
    (box.runpod_sim.ssh.sandbox(first) / "ckpt" / "step-100").write_text("weights")
    assert (box.runpod_sim.ssh.sandbox(second) / "ckpt" / "step-100").read_text() == "weights"


def test_a_wait_for_first_consumer_claim_is_provisioned_for_a_gang(box: Sandbox) -> None:
    add_class(box, volumeBindingMode="WaitForFirstConsumer")
    add_claim(box)
    box.tick()
    assert box.runpod_sim.volumes == {}  # no consumer yet
    _gang_on_claim(box)
    box.tick()
    box.advance(30)
    box.tick()
    [volume] = box.runpod_sim.volumes.values()
    [post] = _cluster_posts(box)
    assert post.body["mounts"]["network"][0]["volumeId"] == volume["id"]
    assert [p["status"]["phase"] for p in box.job_pods("train")] == ["Running", "Running"]


def test_a_gang_whose_volume_is_where_no_cluster_can_be_made_waits_saying_so(
    box: Sandbox,
) -> None:
    for gpu in box.runpod_sim.account.catalog.gpus:
        box.runpod_sim.account.set_capacity(gpu, "EU-RO-1", 0, "CLUSTER")
    add_class(box)  # EU-RO-1: pods have stock there, clusters none
    add_claim(box)
    provision(box)
    _gang_on_claim(box)
    box.advance(30)
    box.tick()
    assert _cluster_posts(box) == []
    for pod in box.job_pods("train"):
        status = pod["status"]
        assert status["phase"] == "Pending"
        waiting = status["containerStatuses"][0]["state"]["waiting"]
        assert waiting["reason"] == "NetworkVolumeUnavailable"
        assert "EU-RO-1" in waiting["message"] and "Instant Cluster stock" in waiting["message"]


def test_a_gangs_claim_is_placed_where_clusters_can_be_made(box: Sandbox) -> None:
    """A WaitForFirstConsumer claim whose class names no data center takes its gang's
    best offer's, ranked on cluster stock: not a data center where pods have room but
    clusters none (its gang would wait there for ever)."""
    for gpu in box.runpod_sim.account.catalog.gpus:
        box.runpod_sim.account.set_capacity(gpu, "US-TX-3", 0, "CLUSTER")
    add_class(box, volumeBindingMode="WaitForFirstConsumer", parameters={})
    add_claim(box)
    _gang_on_claim(box)
    box.tick()
    box.advance(30)
    box.tick()
    [volume] = box.runpod_sim.volumes.values()
    assert volume["dataCenter"] != "US-TX-3"
    [post] = _cluster_posts(box)
    assert post.status == 201 and post.body["dataCenterIds"] == [volume["dataCenter"]]
    assert [p["status"]["phase"] for p in box.job_pods("train")] == ["Running", "Running"]
