"""What RunPod actually charged, and what that tells: leaks and wrong prices.

`GET /v2/billing/pods` gives hourly charges per instance. The engine reads only whole
hours that have ended since its last read (one request an hour at most), keeps the
records of our instances, and the functions here judge them:
- a charge in an hour that began after the instance's pod ended (plus the grace) is a
  leak: RunPod bills an instance we believed gone;
- a charge more than `MISMATCH_RATIO` away from list price times lifetime flags a wrong
  price or an instance that ran longer than we knew. `reconciler cost` shows the flag;
  a read that makes a pod's charge differ when the read before did not tells it once
  (`new_differences`: an Event on the pod and a metric), not at every hourly read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.actions import DeleteCluster
from reconciler.core.domain import BillingRecord, ResourceCharge
from reconciler.core.mapping import MappingRow
from reconciler.core.reasons import TerminateReason

SPEND_ANNOTATION = "runpod.io/spend-usd"
LEAK_REASON = "leak: RunPod bills an instance whose pod has ended"
MISMATCH_RATIO = 0.10
MISMATCH_USD = 0.01
"""A difference below a cent is rounding (a pod that lived seconds), never a wrong price."""


@dataclass(frozen=True)
class Leak:
    instance_id: str
    row: MappingRow
    seconds: float
    """From when the instance should have been gone (its pod's end and the grace) until
    now, when it is terminated again."""
    usd: float


def leaks(
    records: Iterable[BillingRecord],
    rows: Sequence[MappingRow],
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


def list_price_usd(row: MappingRow, until: datetime) -> float | None:
    """List price times how long the instance lived (creation to the pod's end, or `until`)."""
    if row.cost_per_hr is None or row.instance_id is None:
        return None
    start = row.attempt_started_at or row.created_at
    end = row.ended_at or until
    return row.cost_per_hr * max(0.0, (end - start).total_seconds()) / 3600


def unbilled_list_price(
    row: MappingRow, billed_until: datetime | None, now: datetime, since: datetime | None
) -> float:
    """List price times the part of the instance's life that RunPod's billing, read up to
    `billed_until`, has not covered yet (from `since` on, if given): what the pod cost
    that no charge shows, an estimate until the next hourly read. RunPod bills whole
    hours, so a pod of the last minutes has no charge at all before then."""
    if row.cost_per_hr is None or row.instance_id is None:
        return 0.0
    start = max(
        moment
        for moment in (row.attempt_started_at or row.created_at, billed_until, since)
        if moment is not None
    )
    # A finished row that recorded no end (written before ends were kept) ran no later
    # than its last write: it is never an estimate that grows for ever.
    end = row.ended_at or (row.updated_at if row.state.finished else now)
    return row.cost_per_hr * max(0.0, (end - start).total_seconds()) / 3600


def billed_list_price(row: MappingRow, billed_until: datetime) -> float | None:
    """The list-price estimate to compare the charge read up to `billed_until` with; None
    while billing has not reached the end of the instance's life (its last hours unread)."""
    if row.ended_at is not None and billed_until < row.ended_at:
        return None
    return list_price_usd(row, billed_until)


def mismatched(charged: float, listed: float | None) -> bool:
    """Charged differs from the list-price estimate by more than MISMATCH_RATIO, and by a
    cent at least."""
    if listed is None or listed <= 0:
        return False
    return abs(charged - listed) > max(MISMATCH_RATIO * listed, MISMATCH_USD - 1e-9)


@dataclass(frozen=True)
class PriceDifference:
    """A pod charged more than MISMATCH_RATIO away from list price times its lifetime."""

    row: MappingRow
    charged_usd: float
    list_usd: float
    billed_until: datetime

    def message(self) -> str:
        return (
            f"RunPod charged ${self.charged_usd:.2f} for this pod's instance up to "
            f"{self.billed_until:%Y-%m-%d %H:%M} UTC, but its list price over that time is "
            f"${self.list_usd:.2f}: more than {MISMATCH_RATIO:.0%} apart (a wrong price, or "
            "an instance that ran longer than the reconciler knew)"
        )


def new_differences(
    rows: Iterable[MappingRow],
    before: Mapping[str, float],
    before_until: datetime | None,
    after: Mapping[str, float],
    after_until: datetime,
) -> list[PriceDifference]:
    """Pods (by UID in `before` and `after`, USD charged) whose charge differs from list
    price with this read and did not with the last one, so each is told once."""
    found = []
    for row in rows:
        charged = after.get(row.pod_uid, 0.0)
        listed = billed_list_price(row, after_until)
        if listed is None or not mismatched(charged, listed):
            continue
        if before_until is not None and mismatched(
            before.get(row.pod_uid, 0.0), billed_list_price(row, before_until)
        ):
            continue
        found.append(PriceDifference(row, charged, listed, after_until))
    return found


def by_instance(records: Iterable[BillingRecord]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for record in records:
        totals[record.instance_id] += record.total_usd
    return dict(totals)


def spend_by_pod(instance_usd: Mapping[str, float], rows: Iterable[MappingRow]) -> dict[str, float]:
    """Pod UID → USD charged for its instance(s) so far."""
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        if row.instance_id is not None and row.instance_id in instance_usd:
            totals[row.pod_uid] += instance_usd[row.instance_id]
    return dict(totals)


CLUSTER_LEAK_REASON = "leak: RunPod bills an Instant Cluster after it was deleted"


def cluster_leaks(
    records: Iterable[ResourceCharge],
    deleted: Mapping[str, datetime],
    grace_seconds: float,
) -> list[DeleteCluster]:
    """Clusters of ours charged for hours that began after their DELETE was answered
    (plus the grace): deleted again, loudly, as a leaked instance is terminated again."""
    usd: dict[str, float] = defaultdict(float)
    for record in records:
        moment = deleted.get(record.resource_id)
        if moment is None or record.total_usd <= 0:
            continue
        if record.start >= moment + timedelta(seconds=grace_seconds):
            usd[record.resource_id] += record.total_usd
    return [
        DeleteCluster(
            cluster_id,
            TerminateReason.LEAK,
            f"{CLUSTER_LEAK_REASON} (${usd[cluster_id]:.2f} charged since)",
        )
        for cluster_id in sorted(usd)
    ]
