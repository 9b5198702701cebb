"""Stock memory: where RunPod lately refused a create, so that we stop asking there.

RunPod creates on one GPU type per call and answers 400 when it has no machine free;
the GPU catalog's availability, cached for minutes, can say "in stock" long after the
last one went. Without memory every tick would try the cheapest type first again and
pay a refused create for it. So a refusal is remembered per (GPU type, cloud, data
center) — or for the type anywhere, when the create left the data center to RunPod —
and candidates are narrowed past it, in this tick and the next ones, until either:

- a catalog fetched after the refusal shows that type available there again, or
- a back-off ends (a minute, doubling for each refusal in a row, at most ten), after
  which one create tries again.

A create that RunPod accepts forgets the refusals of its type. Pure: time is passed in,
and the engine keeps the one instance that lives across ticks.

A place where an instance failed to start (`core.capacity.starts`: a host too old for the
image, a broken GPU, a start that never finished) is remembered the same way, for
START_FAILED_MEMORY whatever the catalog or a later create says: stock does not mend a
host.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from reconciler.core.domain import Availability, Cloud, CpuFlavor, CreateRequest, GpuType

FIRST_BACKOFF = timedelta(seconds=60)
MAX_BACKOFF = timedelta(seconds=600)
START_FAILED_MEMORY = timedelta(seconds=1800)
ANYWHERE = "*"

# (GPU type or CPU flavor id, cloud, data center id or ANYWHERE)
Place = tuple[str, Cloud, str]


@dataclass(frozen=True)
class RememberedRefusal:
    at: datetime
    until: datetime
    strikes: int
    start_failed: bool = False
    """A start failed there: only time makes it usable again."""


class StockMemory:
    def __init__(self) -> None:
        self._refusals: dict[Place, RememberedRefusal] = {}

    def refused(self, candidate: CreateRequest, now: datetime) -> None:
        """RunPod refused this candidate (no capacity where it asked)."""
        for place in _places(candidate):
            before = self._refusals.get(place)
            strikes = 1 if before is None else before.strikes + 1
            backoff = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (strikes - 1))
            self._refusals[place] = RememberedRefusal(now, now + backoff, strikes)

    def start_failed(self, offer_id: str, datacenter: str | None, now: datetime) -> None:
        """An instance of this type failed to start in this data center, on either cloud."""
        until = now + START_FAILED_MEMORY
        for cloud in Cloud:
            place = (offer_id, cloud, datacenter or ANYWHERE)
            self._refusals[place] = RememberedRefusal(now, until, 1, start_failed=True)

    def accepted(self, offer_id: str, cloud: Cloud) -> None:
        """A create on this type (or CPU flavor) went through: its stock is back, wherever
        it was."""
        for place in [p for p in self._refusals if p[:2] == (offer_id, cloud)]:
            if not self._refusals[place].start_failed:
                del self._refusals[place]

    def catalog_seen(
        self, catalog: Iterable[GpuType | CpuFlavor], fetched_at: datetime, cloud: Cloud
    ) -> None:
        """A catalog fetched at `fetched_at` shows stock: forget older refusals there."""
        for gpu in catalog:
            stocked = {dc.id for dc in gpu.datacenters if dc.availability > Availability.NONE}
            for place, refusal in list(self._refusals.items()):
                if place[:2] != (gpu.id, cloud) or refusal.at >= fetched_at or refusal.start_failed:
                    continue
                where = place[2]
                if where in stocked or (where == ANYWHERE and gpu.availability > Availability.NONE):
                    del self._refusals[place]

    def active(self, now: datetime) -> frozenset[Place]:
        """The places to skip now; refusals whose back-off ended are tried again."""
        return frozenset(p for p, r in self._refusals.items() if r.until > now)

    def __len__(self) -> int:
        return len(self._refusals)


def _places(candidate: CreateRequest) -> list[Place]:
    key = (candidate.offer_id, candidate.cloud)
    return [(*key, dc) for dc in candidate.datacenter_ids or (ANYWHERE,)]


def usable(candidates: Sequence[CreateRequest], refused: frozenset[Place]) -> list[CreateRequest]:
    """The candidates minus the places RunPod refused lately; a candidate keeps the data
    centers that were not refused, and goes when none is left."""
    if not refused:
        return list(candidates)
    kept = []
    for candidate in candidates:
        if (candidate.offer_id, candidate.cloud, ANYWHERE) in refused:
            continue
        if not candidate.datacenter_ids:
            kept.append(candidate)
            continue
        left = tuple(
            dc
            for dc in candidate.datacenter_ids
            if (candidate.offer_id, candidate.cloud, dc) not in refused
        )
        if left:
            kept.append(
                replace(candidate, datacenter_ids=left)
                if left != candidate.datacenter_ids
                else candidate
            )
    return kept
