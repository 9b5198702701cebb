"""What RunPod actually charged, and what that tells: leaks and wrong prices.

`GET /v2/billing/pods` gives hourly charges per instance. The engine reads only whole
hours that have ended since its last read (one request an hour at most), keeps the
records of our instances, and the functions here judge them:
- a charge in an hour that began after the instance's pod ended (plus the grace) is a
  leak: RunPod bills an instance we believed gone;
- a charge more than `MISMATCH_RATIO` away from list price times lifetime flags a wrong
  price or an instance that ran longer than we knew.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.domain import BillingRecord
from reconciler.core.mapping import MappingRecord

SPEND_ANNOTATION = "runpod.io/spend-usd"
LEAK_REASON = "leak: RunPod bills an instance whose pod has ended"
MISMATCH_RATIO = 0.10


@dataclass(frozen=True)
class Leak:
    instance_id: str
    row: MappingRecord
    seconds: float
    """From when the instance should have been gone (its pod's end and the grace) until
    now, when it is terminated again."""
    usd: float


def leaks(
    records: Iterable[BillingRecord],
    rows: Sequence[MappingRecord],
    grace_seconds: float,
    now: datetime,
) -> list[Leak]:
    """Instances charged for hours that began after their pod ended and the grace passed.

    Billing says that an instance still bills; how long it leaked is told by our own
    clock instead: its buckets are whole hours (an instance deleted at 10:05 is charged
    in the 10:00 bucket), so summing them would count up to an hour per bucket that the
    instance did not run. The leak runs from the pod's end plus the grace until this
    tick, which deletes the instance (a DELETE answered 204 or 404 is the only sign of
    its end we can observe; should it bill on, the next read finds it again).
    """
    gone_by = {
        row.instance_id: row.ended_at + timedelta(seconds=grace_seconds)
        for row in rows
        if row.instance_id and row.state.finished and row.ended_at is not None
    }
    usd: dict[str, float] = defaultdict(float)
    for record in records:
        moment = gone_by.get(record.instance_id)
        if moment is not None and record.total_usd > 0 and record.start >= moment:
            usd[record.instance_id] += record.total_usd
    by_id = {row.instance_id: row for row in rows}
    return [
        Leak(i, by_id[i], max(0.0, (now - gone_by[i]).total_seconds()), usd[i]) for i in sorted(usd)
    ]


def annotation_value(usd: float) -> str:
    return f"{usd:.2f}"


def list_price_usd(row: MappingRecord, until: datetime) -> float | None:
    """List price times how long the instance lived (creation to the pod's end, or `until`)."""
    if row.cost_per_hr is None or row.instance_id is None:
        return None
    start = row.attempt_started_at or row.created_at
    end = row.ended_at or until
    return row.cost_per_hr * max(0.0, (end - start).total_seconds()) / 3600


def mismatched(charged: float, listed: float | None) -> bool:
    """Charged differs from the list-price estimate by more than MISMATCH_RATIO."""
    if listed is None or listed <= 0:
        return False
    return abs(charged - listed) > MISMATCH_RATIO * listed


def by_instance(records: Iterable[BillingRecord]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for record in records:
        totals[record.instance_id] += record.total_usd
    return dict(totals)


def spend_by_pod(
    instance_usd: Mapping[str, float], rows: Iterable[MappingRecord]
) -> dict[str, float]:
    """Pod UID → USD charged for its instance(s) so far."""
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        if row.instance_id is not None and row.instance_id in instance_usd:
            totals[row.pod_uid] += instance_usd[row.instance_id]
    return dict(totals)
