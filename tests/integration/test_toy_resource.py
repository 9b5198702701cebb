"""The recipe for a new cloud resource (`runtime/tick/resources/__init__.py`) is true: a toy
billed resource defined in `toy_beacons.py` alone, registered on the engine, is observed
into its typed slot, plans and carries out its own action through the journal (which
records the id it made), says its line in the report, counts in the spend caps, and is
billed hourly into the billing tables, with no edit anywhere else."""

from __future__ import annotations

from reconciler.demo.sandbox import Sandbox

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
