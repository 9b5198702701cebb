"""Stock memory (`core.capacity.stock`): a refused (GPU type, data center) is skipped until
its back-off ends (a minute, doubling per refusal in a row) or a catalog fetched after
the refusal shows stock there; an accepted create forgets its type's refusals; the
candidates a pod gets keep only the data centers not refused; and the planner waits
with a reason instead of planning a create that would only be refused again."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from reconciler.core.actions import Create, PatchStatus
from reconciler.core.capacity.stock import ANYWHERE, StockMemory, usable
from reconciler.core.domain import Availability, Cloud, CreateRequest, DataCenterStock, GpuType
from reconciler.core.reasons import PodReason
from tests.planner.world import World, pod

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
A6000 = "NVIDIA RTX A6000"
BASE = CreateRequest(
    name="p", image="python:3.11", gpu_type_id=A6000, datacenter_ids=("US-TX-3", "EU-RO-1")
)
L40S = replace(BASE, gpu_type_id="NVIDIA L40S", datacenter_ids=("US-TX-3",))


def _gpu(gpu_id: str, *stock: tuple[str, Availability]) -> GpuType:
    best = max((level for _dc, level in stock), default=Availability.NONE)
    return GpuType(
        gpu_id,
        gpu_id,
        48,
        True,
        True,
        0.5,
        0.3,
        availability=best,
        datacenters=tuple(DataCenterStock(dc, level) for dc, level in stock),
    )


def test_a_refusal_skips_its_places_until_the_backoff_ends() -> None:
    memory = StockMemory()
    memory.refused(BASE, T0)
    active = memory.active(T0 + timedelta(seconds=59))
    assert usable([BASE, L40S], active) == [L40S]
    assert usable([BASE, L40S], memory.active(T0 + timedelta(seconds=60))) == [BASE, L40S]


def test_refusals_in_a_row_back_off_longer() -> None:
    memory = StockMemory()
    memory.refused(BASE, T0)
    memory.refused(BASE, T0 + timedelta(seconds=60))
    assert memory.active(T0 + timedelta(seconds=179))
    assert not memory.active(T0 + timedelta(seconds=180))
    for n in range(10):
        memory.refused(BASE, T0 + timedelta(seconds=n))
    assert not memory.active(T0 + timedelta(seconds=610))  # capped at ten minutes


def test_only_the_refused_data_centers_are_dropped() -> None:
    memory = StockMemory()
    memory.refused(replace(BASE, datacenter_ids=("US-TX-3",)), T0)
    [left] = usable([BASE], memory.active(T0))
    assert left.datacenter_ids == ("EU-RO-1",)


def test_a_create_left_to_any_data_center_refuses_the_type_anywhere() -> None:
    memory = StockMemory()
    memory.refused(replace(BASE, datacenter_ids=()), T0)
    assert (A6000, Cloud.SECURE, ANYWHERE) in memory.active(T0)
    assert usable([BASE], memory.active(T0)) == []


def test_a_later_catalog_showing_stock_clears_the_refusal() -> None:
    memory = StockMemory()
    memory.refused(BASE, T0)
    stale = [_gpu(A6000, ("US-TX-3", Availability.HIGH))]
    memory.catalog_seen(stale, T0 - timedelta(seconds=1), Cloud.SECURE)  # fetched before
    assert len(memory.active(T0)) == 2
    fresh = [_gpu(A6000, ("US-TX-3", Availability.LOW), ("EU-RO-1", Availability.NONE))]
    memory.catalog_seen(fresh, T0 + timedelta(seconds=30), Cloud.SECURE)
    assert memory.active(T0 + timedelta(seconds=30)) == {(A6000, Cloud.SECURE, "EU-RO-1")}
    memory.catalog_seen(fresh, T0 + timedelta(seconds=30), Cloud.COMMUNITY)  # other cloud
    assert len(memory.active(T0 + timedelta(seconds=30))) == 1


def test_an_accepted_create_forgets_its_type() -> None:
    memory = StockMemory()
    memory.refused(BASE, T0)
    memory.refused(L40S, T0)
    memory.accepted(A6000, Cloud.SECURE)
    assert memory.active(T0) == {("NVIDIA L40S", Cloud.SECURE, "US-TX-3")}


def test_the_planner_skips_refused_places_and_waits_when_none_is_left() -> None:
    world = World().add(pod("a"))
    [create] = [a for a in world.plan() if isinstance(a, Create)]
    first = create.candidates[0]
    world.refused = frozenset({(first.gpu_type_id, first.cloud, dc) for dc in first.datacenter_ids})
    [create] = [a for a in world.plan() if isinstance(a, Create)]
    assert first.gpu_type_id not in [c.gpu_type_id for c in create.candidates]
    world.refused = frozenset(
        {(c.gpu_type_id, c.cloud, ANYWHERE) for c in [first, *create.candidates]}
    )
    actions = world.plan()
    assert not [a for a in actions if isinstance(a, Create)]
    [patch] = [a for a in actions if isinstance(a, PatchStatus)]
    assert patch.row.reason == PodReason.CAPACITY_UNAVAILABLE
