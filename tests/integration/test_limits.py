"""Limits end to end: no GPU capacity (Pending with a reason, Failed after the deadline),
the instance and spend caps, and a burst of 100 pods against a 60-per-minute quota."""

from __future__ import annotations

from reconciler.core.reasons import PodReason
from reconciler.demo.sandbox import Sandbox


def set_capacity(box: Sandbox, places: list[tuple[str, str]], count: int) -> None:
    for gpu_id, datacenter_id in places:
        box.runpod_sim.account.set_capacity(gpu_id, datacenter_id, count)


def exhaust_capacity(box: Sandbox) -> list[tuple[str, str]]:
    places = [(gpu.id, dc.id) for gpu in box.runpod.catalog.gpu_types() for dc in gpu.datacenters]
    set_capacity(box, places, 0)
    return places


def status_reason(box: Sandbox, name: str) -> str | None:
    pod = box.pod(name) or {}
    if pod["status"].get("reason"):
        return str(pod["status"]["reason"])
    waiting = pod["status"]["containerStatuses"][0]["state"].get("waiting") or {}
    return waiting.get("reason")


def test_no_capacity_keeps_the_pod_pending_then_fails_it(box: Sandbox) -> None:
    exhaust_capacity(box)
    box.add_pod("a")
    box.tick()
    assert (box.pod("a") or {})["status"]["phase"] == "Pending"
    assert status_reason(box, "a") == PodReason.CAPACITY_UNAVAILABLE
    assert [e["reason"] for e in box.events("a")] == [PodReason.CAPACITY_UNAVAILABLE]
    box.advance(60)
    box.tick()
    assert len(box.events("a")) == 1  # same reason, no repeated Event
    box.advance(box.settings.timing.max_pending_time)
    box.tick()
    pod = box.pod("a") or {}
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["reason"] == PodReason.CAPACITY_UNAVAILABLE
    assert box.owned_instances() == []


def create_statuses(box: Sandbox) -> list[int]:
    return [r.status for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods")]


def test_capacity_gone_after_the_catalog_was_read_is_retried(box: Sandbox) -> None:
    box.add_pod("first")
    box.tick()  # caches the catalog while it shows stock
    places = exhaust_capacity(box)
    box.add_pod("second")
    box.tick()  # every candidate answers 400: the Event is immediate...
    assert PodReason.CAPACITY_UNAVAILABLE in [e["reason"] for e in box.events("second")]
    refused = len(create_statuses(box))
    box.tick()  # ...and the next plan shows the reason, without asking RunPod again
    assert status_reason(box, "second") == PodReason.CAPACITY_UNAVAILABLE
    assert len(create_statuses(box)) == refused
    set_capacity(box, places, 5)
    box.advance(30)  # a refusal makes the cached catalog stale: it is read again
    box.tick()
    assert box.instance_for(box.pod("second") or {}) is not None


def test_a_refused_gpu_type_is_skipped_across_ticks(box: Sandbox) -> None:
    """The cheapest type runs out after the catalog was cached: one refused create, not
    one per tick, and the next type serves the pods that follow."""
    box.add_pod("warm", annotations={"runpod.io/gpu-types": "RTX A6000,L40S"})
    box.tick()  # the catalog is cached while the RTX A6000 is in stock
    set_capacity(box, [("NVIDIA RTX A6000", dc) for dc in ("US-TX-3", "EU-RO-1")], 0)
    for number in range(4):
        box.add_pod(f"p{number}", annotations={"runpod.io/gpu-types": "RTX A6000,L40S"})
        box.tick()
        box.advance(5)
    assert create_statuses(box).count(400) == 1
    gpus = [
        (box.instance_for(box.pod(f"p{n}") or {}) or {}).get("gpu", {}).get("id") for n in range(4)
    ]
    assert gpus == ["NVIDIA L40S"] * 4


def test_a_refused_type_is_tried_again_once_the_catalog_shows_stock(box: Sandbox) -> None:
    annotations = {"runpod.io/gpu-types": "RTX A6000,L40S"}
    box.add_pod("warm", annotations=annotations)
    box.tick()
    a6000 = [("NVIDIA RTX A6000", dc) for dc in ("US-TX-3", "EU-RO-1")]
    set_capacity(box, a6000, 0)
    box.add_pod("refused", annotations=annotations)
    box.tick()  # refused on the A6000, created on the L40S; the catalog is now stale
    set_capacity(box, a6000, 4)
    box.advance(31)
    box.add_pod("later", annotations=annotations)
    box.tick()  # the catalog is read again, shows the A6000 in stock: tried first again
    assert (box.instance_for(box.pod("later") or {}) or {})["gpu"]["id"] == "NVIDIA RTX A6000"
    assert create_statuses(box).count(400) == 1


def test_instance_cap_holds_and_waiting_pods_say_why(box: Sandbox) -> None:
    box.configure(max_instances=2)
    for n in range(4):
        box.add_pod(f"p{n}")
        box.advance(1)
    box.tick()
    box.tick()
    assert len(box.owned_instances()) == 2
    assert status_reason(box, "p3") == PodReason.BUDGET_EXCEEDED
    assert PodReason.BUDGET_EXCEEDED in [e["reason"] for e in box.events("p3")]
    box.kube_sim.delete_pod("default", "p0")
    box.tick()
    box.tick()
    assert len(box.owned_instances()) == 2
    assert box.instance_for(box.pod("p2") or {}) is not None  # oldest waiting pod first


def test_spend_cap_holds_and_only_affordable_gpus_are_tried(box: Sandbox) -> None:
    box.configure(max_hourly_spend=1.0)
    for n in range(3):
        box.add_pod(f"p{n}")
    for _ in range(3):
        box.tick()
    spend = sum(float(i["cost"]) for i in box.owned_instances())
    assert 0 < spend <= 1.0
    assert PodReason.BUDGET_EXCEEDED in [e["reason"] for e in box.events("p2")]


def test_burst_of_100_pods_under_60_per_minute_without_a_429(box: Sandbox) -> None:
    box.configure(max_creates_per_tick=100, max_instances=200, max_hourly_spend=1000)
    for n in range(100):
        box.add_pod(f"p{n:03d}")
    ticks = 0
    while len(box.owned_instances()) < 100 and ticks < 10:
        box.tick()
        box.advance(15)
        ticks += 1
    assert len(box.owned_instances()) == 100
    assert ticks > 1  # the quota spread the creates over several ticks
    assert [r for r in box.runpod_sim.requests if r.status == 429] == []


def test_a_tick_stops_creating_when_the_quota_is_spent_instead_of_waiting(box: Sandbox) -> None:
    """The next tick, at the window's reset, gets the fresh window (shared fairly when
    other reconcilers use the key); a tick never sleeps through a reset holding slots."""
    box.configure(max_creates_per_tick=100, max_instances=200, max_hourly_spend=1000)
    for n in range(80):
        box.add_pod(f"p{n:03d}")
    started = box.clock.monotonic()
    report = box.tick()
    created = len(box.owned_instances())
    # The first minute's quota, less the tick's list, the catalog and a reserve.
    assert 40 <= created + report.deferred_creates < 60
    assert box.clock.monotonic() - started < 60  # it did not wait for the next minute
    box.advance(60)
    box.tick()
    assert len(box.owned_instances()) == 80
    assert [r for r in box.runpod_sim.requests if r.status == 429] == []
