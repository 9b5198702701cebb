"""The campaign's network-volume invariants read RunPod's request log over the whole run
and see every reconciler of the account: each is fed a world that breaks it (a check
that cannot fail proves nothing). Pure: no simulator."""

from __future__ import annotations

from typing import Any

from reconciler.core.resources.volume_objects import volume_name
from reconciler.sim.runpod_gateway import REQUEST_LOG_LIMIT
from tests.chaos.invariants import (
    request_log_violations,
    volumes_left_billing,
    volumes_made_twice,
)
from tests.chaos.world import Snapshot

OWNER = "cluster-1/node-a"
NEIGHBOUR = "cluster-1/node-b"


def volume_post(owner: str, claim: str, status: int = 201) -> Any:
    return {
        "method": "POST",
        "path": "/v2/network-volumes",
        "status": status,
        "body": {"name": volume_name(owner, claim), "size": 10, "dataCenterId": "EU-RO-1"},
    }


def volume(vid: str, owner: str, claim: str) -> Any:
    return {"id": vid, "name": volume_name(owner, claim), "size": 10}


def claim(uid: str) -> Any:
    return {
        "metadata": {"uid": uid, "name": f"c-{uid}"},
        "spec": {"resources": {"requests": {"storage": "10G"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "10G"}},
    }


def pv(vid: str, claim_uid: str, reclaim: str = "Delete") -> Any:
    return {
        "metadata": {"name": f"pvc-{claim_uid}"},
        "spec": {
            "csi": {"volumeHandle": vid},
            "claimRef": {"uid": claim_uid},
            "persistentVolumeReclaimPolicy": reclaim,
        },
    }


def world(claims: list[Any], pvs: list[Any], volumes: list[Any]) -> Snapshot:
    by_uid = {c["metadata"]["uid"]: c for c in claims}
    return Snapshot(OWNER, "node-a", {}, [], by_uid, pvs, volumes)


def test_a_planted_double_volume_create_is_caught_from_the_request_log() -> None:
    """Two virtual nodes, one Immediate claim: each names its volume with its own owner
    digest, so two volumes for one claim have two names. The final snapshot may show one
    (the other deleted since): the request log still shows two 201s for the claim."""
    once = [volume_post(OWNER, "k1"), volume_post(NEIGHBOUR, "k1", 409), volume_post(OWNER, "k2")]
    assert volumes_made_twice(once) == []
    planted = [*once, volume_post(NEIGHBOUR, "k1")]
    [caught] = volumes_made_twice(planted)
    assert caught.startswith("2 volumes made for claim k1")
    assert volume_name(NEIGHBOUR, "k1") in caught


def test_a_volume_left_billing_after_its_claim_is_caught_whoever_made_it() -> None:
    made = [volume_post(OWNER, "k1"), volume_post(NEIGHBOUR, "k2")]
    kept = world([claim("k1"), claim("k2")], [pv("v1", "k1"), pv("v2", "k2")], [])
    kept.volumes = [volume("v1", OWNER, "k1"), volume("v2", NEIGHBOUR, "k2")]
    assert volumes_left_billing(made, kept) == []
    # The neighbour's volume, its claim gone and its PV saying Delete: it bills on.
    # The snapshot's own view (our owner only) does not see it.
    gone = world([claim("k1")], [pv("v1", "k1"), pv("v2", "k2")], [])
    gone.volumes = kept.volumes
    assert gone.leaked_volumes() == []
    [billing] = volumes_left_billing(made, gone)
    assert "v2" in billing and "claim is gone" in billing
    # Retain keeps it with its Released PV.
    retained = world([claim("k1")], [pv("v1", "k1"), pv("v2", "k2", "Retain")], kept.volumes)
    assert volumes_left_billing(made, retained) == []
    # A volume no PV names bills on, claim or not (a duplicate's loser).
    orphaned = world([claim("k1"), claim("k2")], [pv("v1", "k1")], kept.volumes)
    assert volumes_left_billing(made, orphaned) == [
        f"volume v2 ({volume_name(NEIGHBOUR, 'k2')}) bills on: no PV, its claim lives"
    ]
    # A volume no POST of ours made (a foreign one) is none of this check's business.
    foreign = world([], [], [{"id": "f1", "name": "datasets", "size": 10}])
    assert volumes_left_billing(made, foreign) == []


def test_a_neighbours_volumes_are_the_runs_in_the_snapshot() -> None:
    volumes = [volume("v1", OWNER, "k1"), volume("v2", NEIGHBOUR, "k1")]
    alone = world([claim("k1")], [pv("v1", "k1")], volumes)
    assert alone.duplicate_volumes() == []  # blind to the neighbour's
    both = Snapshot(
        OWNER, "node-a", {}, [], {"k1": claim("k1")}, [pv("v1", "k1")], volumes, (NEIGHBOUR,)
    )
    assert both.duplicate_volumes() == ["claim k1 has volumes ['v1', 'v2']"]
    assert both.leaked_volumes()  # v2: no PV names it


def test_a_request_log_that_lost_its_start_is_caught() -> None:
    assert request_log_violations([{}] * (REQUEST_LOG_LIMIT - 1)) == []
    assert request_log_violations([{}] * REQUEST_LOG_LIMIT)
