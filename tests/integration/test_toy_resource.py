"""The recipe for a new cloud resource (`runtime/tick/resources/__init__.py`) is true: a toy
billed resource defined in `toy_beacons.py` alone, registered on the engine, is observed
into its typed slot, plans and carries out its own action through the journal (which
records the id it made), says its line in the report, counts in the spend caps, is
billed hourly into the billing tables, shown by `reconciler cost` and checked by the
hourly ghost-charge audit, with no edit anywhere else."""

from __future__ import annotations

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.process.metrics import Metrics

from .test_resource_cost import _cost
from .toy_beacons import KIND, USD_PER_HOUR, BeaconCloud, Beacons, BeaconSection, BeaconsSeen


def test_a_toy_billed_resource_needs_nothing_but_its_module_and_its_registration(
    box: Sandbox,
) -> None:
    cloud = BeaconCloud()
    box.engine.resources.append(Beacons(box.engine.shared, cloud))

    first = box.tick()
    assert first.observation is not None
    assert first.observation.slot(BeaconsSeen) == BeaconsSeen(())
    assert first.applied["CreateBeacon"] == 1 and not first.failed
    assert cloud.list() == ["beacon-1"]
    assert first.section(BeaconSection) == BeaconSection(seen=0, planned=1)
    assert "0 beacons, 1 to make" in first.section_lines()
    [entry] = [e for e in box.store.journal() if e.kind == "create-beacon"]
    assert (entry.resource_id, entry.outcome) == ("beacon-1", "ok")

    # A pod about to be created: the caps count what the beacon keeps costing.
    box.add_pod("a")
    second = box.tick()
    assert second.observation is not None
    assert second.observation.standing_spend.get("default", 0.0) >= USD_PER_HOUR
    assert second.section(BeaconSection) == BeaconSection(seen=1, planned=0)
    assert second.planned["CreateBeacon"] == 0

    # Once a whole hour has ended, its charges are read once and kept under its kind.
    box.advance(2 * 3600)
    billed = box.tick()
    [read] = [r for r in billed.resource_billing if r.kind == KIND]
    assert {r.resource_id for r in read.records} == {"beacon-1"}
    assert box.store.billing.resource_covered_until(KIND) == read.covered_until
    reads = len(cloud.billing_reads)
    box.tick()
    assert len(cloud.billing_reads) == reads  # at most once an hour


def test_a_toy_resource_s_charges_are_in_cost_and_a_ghost_of_it_is_told(box: Sandbox) -> None:
    cloud = BeaconCloud()
    box.engine.resources.append(Beacons(box.engine.shared, cloud))
    box.tick()
    box.advance(2 * 3600)
    box.tick()

    shown = _cost(box)
    [row] = [r for r in shown["rows"] if r.get("kind") == KIND]
    assert row["pod"] == "default/beacon" and row["usd"] >= USD_PER_HOUR
    assert shown["billed_until_by_kind"][KIND] is not None

    # The cloud loses the beacon from its list and its reads by id, yet bills it on: the
    # hourly audit watches it, then reads it by id and tells it.
    cloud.lose("beacon-1")
    reports = []
    for _ in range(4 * 3):
        box.advance(20 * 60)
        reports.append(box.tick())
    assert [(g.kind, g.resource_id) for g in reports[-1].ghost_charges or ()] == [
        (KIND, "beacon-1")
    ]
    assert "beacon-1" in cloud.reads_by_id
    assert "beacon-2" not in cloud.reads_by_id  # listed: never read by id
    [ghost] = _cost(box)["charged_but_gone"]
    assert (ghost["kind"], ghost["id"]) == (KIND, "beacon-1")
    metrics = Metrics()
    metrics.observe(reports[-1], None, box.settings.owner_id)
    assert metrics.registry.get_sample_value("reconciler_charged_gone_resources") == 1
