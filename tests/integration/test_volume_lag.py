"""RunPod's volume list lags behind creates, as its pod list does (docs/architecture.md
§3, "Cloud resources"): through both simulators, a volume the list omits is read by id
(`GET /v2/network-volumes/{id}`) before anything is concluded from its absence. A
released PV whose volume the list does not show yet gets its volume deleted, not its PV
dropped with the volume left billing; a grown claim's volume is grown, not refused as
"not ours"; only a 404 by id lets a PV go as "already gone". A steady tick still sends
nothing for volumes."""

from __future__ import annotations

from dataclasses import replace

from reconciler.demo.sandbox import Sandbox
from reconciler.sim.kube.resources import PERSISTENT_VOLUME_CLAIMS

from .crashing import crash_in
from .test_claims import add_claim, add_class, claim, delete_claim, provision, pv_of, volume_calls
from .test_cluster_lag import delete_database

LAG = 600.0


def by_id(box: Sandbox) -> list[str]:
    return [
        path for method, path, _ in volume_calls(box) if method == "GET" and path.count("/") == 3
    ]


def test_a_released_volume_the_list_omits_is_deleted_not_dropped(box: Sandbox) -> None:
    box.runpod_sim.account.set_listing_lag(LAG)
    add_class(box)
    made = add_claim(box)
    provision(box)
    [volume_id] = box.runpod_sim.volumes
    delete_claim(box)
    assert pv_of(box, made)["status"]["phase"] == "Released"
    box.tick()
    assert volume_id not in box.runpod_sim.volumes  # deleted, not left billing
    assert pv_of(box, made) is None
    assert by_id(box) == [f"/v2/network-volumes/{volume_id}"]
    before = len(volume_calls(box))
    box.tick()
    assert len(volume_calls(box)) == before  # steady: not a request


def test_a_pv_goes_as_already_gone_only_on_a_404_by_id(box: Sandbox) -> None:
    add_class(box)
    made = add_claim(box)
    provision(box)
    delete_claim(box)
    crash_in(box, "after-volume-delete")  # the volume went, its released PV stayed
    assert box.runpod_sim.volumes == {}
    box.runpod_sim.faults.inject("GET", "/v2/network-volumes/*", 403)
    box.tick()
    assert pv_of(box, made) is not None  # its GET refused: nothing concluded
    box.tick()
    assert pv_of(box, made) is None  # RunPod answered 404: the PV goes


def test_a_grown_claim_whose_volume_the_list_omits_is_grown(box: Sandbox) -> None:
    box.runpod_sim.account.set_listing_lag(LAG)
    add_class(box, allowVolumeExpansion=True)
    add_claim(box)
    provision(box)
    grown = claim(box)
    grown["spec"]["resources"]["requests"]["storage"] = "40Gi"
    box.kube_sim.store.update(PERSISTENT_VOLUME_CLAIMS, "default", "ckpt", grown)
    box.tick()
    [volume] = box.runpod_sim.volumes.values()
    assert volume["size"] == 43
    reasons = [e["reason"] for e in box.kube_sim.list("events", "default")]
    assert "VolumeResizeFailed" not in reasons


def test_a_crash_after_the_post_with_the_list_lagging_makes_one_volume(box: Sandbox) -> None:
    """The claim is held with the time of its POST: while the create grace runs, a
    volume the list does not show yet is waited for, not made again (as an instance's
    in-doubt create is); the database plays no part (it is lost with the crash)."""
    box.runpod_sim.account.set_listing_lag(box.settings.timing.create_grace_time / 2)
    add_class(box)
    made = add_claim(box)
    crash_in(box, "after-volume-create")
    delete_database(box)
    box.restart()
    for _ in range(4):
        box.tick()
        box.advance(box.settings.timing.create_grace_time / 6)
    assert len([c for c in volume_calls(box) if c[0] == "POST"]) == 1
    assert len(box.runpod_sim.volumes) == 1
    assert pv_of(box, made)["spec"]["csi"]["volumeHandle"] in box.runpod_sim.volumes


def test_a_dead_writers_hold_keeps_its_volume_from_being_made_again(box: Sandbox) -> None:
    """A writer died just after a volume's POST, and the list lags past the claim's create
    grace: its successor, which took over the dead writer's Lease, holds its creates (as
    for instances) and makes no second volume; once the list shows the volume, its PV."""
    grace = box.settings.timing.create_grace_time
    box.runpod_sim.account.set_listing_lag(grace * 3)
    add_class(box)
    made = add_claim(box)
    crash_in(box, "after-volume-create")
    delete_database(box)
    box.restart()
    box.engine.hooks = replace(box.engine.hooks, creates_held=lambda: True)
    box.advance(grace * 2)
    box.tick()
    assert len([c for c in volume_calls(box) if c[0] == "POST"]) == 1
    box.engine.hooks = replace(box.engine.hooks, creates_held=lambda: False)
    box.advance(grace * 2)
    box.tick()
    assert len([c for c in volume_calls(box) if c[0] == "POST"]) == 1
    assert pv_of(box, made)["spec"]["csi"]["volumeHandle"] in box.runpod_sim.volumes
