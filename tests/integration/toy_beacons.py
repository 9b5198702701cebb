"""A toy billed cloud resource, made only of what the recipe in
`runtime/tick/resources/__init__.py` asks (test_toy_resource.py registers it): a beacon
cloud in memory, its own action, its typed part of the observation and of the report,
its steps that journal what a create made, its standing spend and its billing route
with how the hourly ghost-charge audit checks it. Nothing outside this module knows it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.adapters.runpod.errors import RunPodNotFound
from reconciler.core.actions import Action
from reconciler.core.domain import ResourceCharge
from reconciler.core.money.attribution import Attribution
from reconciler.core.plan.observation import Observation
from reconciler.runtime.tick.money import billing
from reconciler.runtime.tick.resources.base import AfterPods, Shared, Sighting
from reconciler.runtime.tick.run_context import RunContext
from reconciler.runtime.tick.tick_report import TickReport

KIND = "beacon"
USD_PER_HOUR = 0.25


@dataclass
class BeaconCloud:
    """The toy's cloud: beacons by id, each charged by the hour while it lives, and one
    it `lost` charged on though it neither lists it nor answers for it (a ghost)."""

    made: dict[str, datetime] = field(default_factory=dict)
    lost: dict[str, datetime] = field(default_factory=dict)
    billing_reads: list[tuple[datetime, datetime]] = field(default_factory=list)
    reads_by_id: list[str] = field(default_factory=list)

    def list(self) -> list[str]:
        return sorted(self.made)

    def create(self, now: datetime) -> str:
        beacon_id = f"beacon-{len(self.made) + len(self.lost) + 1}"
        self.made[beacon_id] = now
        return beacon_id

    def get(self, beacon_id: str) -> str:
        self.reads_by_id.append(beacon_id)
        if beacon_id not in self.made:
            raise RunPodNotFound(f"no beacon {beacon_id}", status=404)
        return beacon_id

    def lose(self, beacon_id: str) -> None:
        self.lost[beacon_id] = self.made.pop(beacon_id)

    def charges(self, since: datetime, until: datetime) -> list[ResourceCharge]:
        self.billing_reads.append((since, until))
        found = []
        for beacon_id, made in {**self.made, **self.lost}.items():
            hour = max(since, made.replace(minute=0, second=0, microsecond=0))
            while hour + timedelta(hours=1) <= until:
                found.append(
                    ResourceCharge(beacon_id, hour, hour + timedelta(hours=1), USD_PER_HOUR)
                )
                hour += timedelta(hours=1)
        return found


@dataclass(frozen=True)
class CreateBeacon:
    """The toy's one action: make the node's beacon."""

    namespace: str = "default"

    def shown(self) -> tuple[str, str]:
        return self.namespace, "a beacon"


@dataclass(frozen=True)
class BeaconsSeen:
    """The toy's typed slot of the observation."""

    ids: tuple[str, ...]


@dataclass(frozen=True)
class BeaconSection:
    """The toy's section of the tick's report."""

    seen: int
    planned: int

    def line(self) -> str | None:
        return f"{self.seen} beacons, {self.planned} to make"


class BeaconSteps:
    actions: tuple[type[Action], ...] = (CreateBeacon,)

    def __init__(self, context: RunContext, cloud: BeaconCloud, shared: Shared) -> None:
        self.context, self.cloud, self.shared = context, cloud, shared

    def apply(self, action: Action) -> None:
        assert isinstance(action, CreateBeacon)
        now = self.context.clock()
        beacon_id = self.context.journaled(
            "create-beacon",
            None,
            None,
            lambda: self.cloud.create(now),
            made=lambda made_id: made_id,
        )
        attribution = Attribution(KIND, beacon_id, action.namespace, "beacon", None)
        self.shared.attributions.save(self.shared.store, [attribution], now)

    def unrecorded(self) -> int:
        return 0


class Beacons:
    """The toy as a resource of the tick (`runtime/tick/resources/base.py`'s `Resource`)."""

    def __init__(self, shared: Shared, cloud: BeaconCloud) -> None:
        self.shared, self.cloud = shared, cloud

    def steps(self, context: RunContext) -> BeaconSteps:
        return BeaconSteps(context, self.cloud, self.shared)

    def observe(self, sighting: Sighting) -> None:
        sighting.slots[BeaconsSeen] = BeaconsSeen(tuple(self.cloud.list()))

    def plan(self, observation: Observation, now: datetime) -> Sequence[Action]:
        seen = observation.slot(BeaconsSeen)
        assert seen is not None
        return [] if seen.ids else [CreateBeacon()]

    def planned(self, report: TickReport) -> None:
        assert report.observation is not None
        seen = report.observation.slot(BeaconsSeen)
        assert seen is not None
        planned = sum(isinstance(a, CreateBeacon) for a in report.actions)
        report.sections[BeaconSection] = BeaconSection(len(seen.ids), planned)

    def after_pods(self, tick: AfterPods) -> None:
        """Nothing after the pods."""

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        return {"default": USD_PER_HOUR * len(self.cloud.list())}

    def billing(self) -> billing.BillingRoute:
        audit = billing.Audit(lambda _: set(self.cloud.list()), self.cloud.get)
        return billing.BillingRoute(KIND, self.cloud.charges, creates=(CreateBeacon,), audit=audit)
