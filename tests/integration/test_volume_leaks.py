"""A leaked network volume of ours (our name, no PV names it, no claim waits for it) is
told on every tick, `sync --once` runs included, from the most recent volume list kept
in the store (no request of its own on a steady tick); it is counted in the spend caps;
a duplicate (its claim bound to another volume: a lost answer, another reconciler that
took the claim over) is deleted after the orphan grace when nothing mounts it, while one
whose claim is gone is kept; another owner's volume is never touched. Through both
simulators (docs/architecture.md §3, "Network volumes")."""

from __future__ import annotations

from typing import Any

import requests

from reconciler.core.domain import RunPodVolume
from reconciler.core.resources import storage_prices
from reconciler.core.resources.volume_objects import persistent_volume, volume_name
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.runtime.process.metrics import Metrics
from reconciler.runtime.tick.resources.sections import VolumeSection
from reconciler.sim.kube.resources import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES

from .test_claims import add_claim, add_class, claim, provision, volume_calls
from .test_gang_end_on_pods import delete_database
from .test_limits import status_reason
from .test_resource_cost import _cost

OTHER = "cluster-x/other-virtual-node"


def lists(box: Sandbox) -> int:
    return sum(
        1
        for method, path, _ in volume_calls(box)
        if (method, path) == ("GET", "/v2/network-volumes")
    )


def taken_over(box: Sandbox, size: int = 4000) -> tuple[Any, Any]:
    """The end state of issue's case: our POST made a volume for the claim, yet the claim
    is bound to another reconciler's volume (it overwrote our hold and made its own)."""
    add_class(box)
    made = add_claim(box)
    uid = made["metadata"]["uid"]
    ours = box.runpod_sim.add_volume(volume_name(box.settings.owner_id, uid), size, "EU-RO-1")
    theirs = box.runpod_sim.add_volume(volume_name(OTHER, uid), 22, "EU-RO-1")
    cls = box.kube_sim.get("storageclasses", None, "runpod")
    volume = RunPodVolume(theirs.id, theirs.name, 22, "EU-RO-1")
    box.kube_sim.put("persistentvolumes", persistent_volume(claim(box), cls, volume, "other-node"))
    assert claim(box)["status"]["phase"] == "Bound"
    return ours, theirs


def test_a_duplicate_volume_is_told_every_once_run_and_collected_after_the_grace(
    box: Sandbox,
) -> None:
    ours, theirs = taken_over(box)
    grace = box.settings.timing.orphan_grace_time
    told = []
    for _ in range(5):
        box.restart()  # a CronJob: a new process each tick
        report = box.tick()
        told.append(VolumeSection.of(report).leaks)
        metrics = Metrics()
        metrics.observe(report, None, box.settings.owner_id)
        assert metrics.registry.get_sample_value("reconciler_leaked_network_volumes") == 1
        box.advance(grace / 4)
    assert told == [[ours.id]] * 5
    assert lists(box) == 1  # the first run listed; the others told from the kept list
    assert ours.id not in box.runpod_sim.volumes  # collected after the grace
    assert theirs.id in box.runpod_sim.volumes  # another owner's: never touched
    deletes = [path for method, path, _ in volume_calls(box) if method == "DELETE"]
    assert deletes == [f"/v2/network-volumes/{ours.id}"]
    box.restart()
    assert VolumeSection.of(box.tick()).leaks == []


def test_a_duplicate_volume_is_collected_on_fresh_databases(box: Sandbox) -> None:
    """A CronJob chain whose database is lost on every run: when a list first showed the
    duplicate is never kept, so its grace counts from its claim's binding (the bound
    volume's PV, by Kubernetes' own record). It was told on every run and never
    collected."""
    ours, theirs = taken_over(box)
    grace = box.settings.timing.orphan_grace_time
    for _ in range(6):
        delete_database(box)
        box.restart()
        box.tick()
        box.advance(grace / 4)
    assert ours.id not in box.runpod_sim.volumes
    assert theirs.id in box.runpod_sim.volumes


def test_a_leaked_volume_is_shown_by_cost(box: Sandbox) -> None:
    ours, _ = taken_over(box)
    box.tick()
    [shown] = _cost(box)["leaked_network_volumes"]
    assert (shown["id"], shown["size_gb"]) == (ours.id, 4000)
    assert shown["usd_per_hour"] == round(storage_prices.hourly_usd(4000, "STANDARD"), 4)


def test_a_leaked_volume_counts_in_the_spend_cap(box: Sandbox) -> None:
    add_class(box)
    kept = box.runpod_sim.add_volume(volume_name(box.settings.owner_id, "gone"), 4000, "EU-RO-1")
    box.add_pod("probe")
    box.tick()  # a new database's first audit lists once and finds the leak
    price = float((box.instance_for(box.pod("probe") or {}) or {})["cost"])
    storage = storage_prices.hourly_usd(4000, "STANDARD")
    # Room for the probe and another pod, not with the leak's storage beside them.
    box.configure(max_hourly_spend=2 * price + storage / 2)
    box.restart()  # a new process counts it from the kept facts, before its own audit
    box.add_pod("trainer")
    box.tick()
    assert box.instance_for(box.pod("trainer") or {}) is None
    assert status_reason(box, "trainer") == "BudgetExceeded"
    assert kept.id in box.runpod_sim.volumes  # its claim is gone: kept, never guessed


def test_a_volume_gone_since_the_kept_list_is_no_leak(box: Sandbox) -> None:
    """Another process (a database of its own) deleted the volume and its PV after this
    database kept the list that showed it: the kept list is not proof it still exists.
    It is read by id once (404) and forgotten, never told as a leak."""
    add_class(box)
    made = add_claim(box)
    provision(box)
    [volume_id] = box.runpod_sim.volumes
    box.advance(3601)
    box.tick()  # the hourly list keeps it (named by its PV: no leak)
    with requests.Session() as api:
        answer = api.delete(
            f"{box.runpod_sim.base_url}/v2/network-volumes/{volume_id}",
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=5,
        )
        assert answer.status_code == 204
    box.kube_sim.store.delete(PERSISTENT_VOLUMES, None, f"pvc-{made['metadata']['uid']}")
    box.kube_sim.store.delete(PERSISTENT_VOLUME_CLAIMS, "default", "ckpt")
    box.restart()
    assert VolumeSection.of(box.tick()).leaks == []
    reads = [p for m, p, _ in volume_calls(box) if m == "GET" and p.endswith(volume_id)]
    assert reads == [f"/v2/network-volumes/{volume_id}"]  # read once, 404
    box.restart()
    assert VolumeSection.of(box.tick()).leaks == []
    assert len([p for m, p, _ in volume_calls(box) if p.endswith(volume_id)]) == 2  # no more


def test_a_kept_leak_is_told_since_its_first_list_across_the_hourly_lists(box: Sandbox) -> None:
    """Each hourly list shows it again: it stays a leak, told (and counted) since the
    list that first showed it, never forgotten and found anew."""
    add_class(box)
    stray = box.runpod_sim.add_volume(
        volume_name(box.settings.owner_id, "gone-claim"), 10, "EU-RO-1"
    )
    add_claim(box)  # a claim to provision: the tick lists the volumes
    assert VolumeSection.of(box.tick()).leaks == [stray.id]
    [told] = _cost(box)["leaked_network_volumes"]
    before = lists(box)
    for _ in range(3):
        box.advance(3600)
        assert VolumeSection.of(box.tick()).leaks == [stray.id]
        assert _cost(box)["leaked_network_volumes"] == [told]
    assert lists(box) - before >= 3  # listed again every hour
    assert stray.id in box.runpod_sim.volumes
