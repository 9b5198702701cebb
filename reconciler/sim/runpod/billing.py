"""The simulated RunPod's billing: a per-pod ledger and the contract's bucketed queries.

Each pod accrues charges on the simulator's clock: its GPUs from creation until it is
stopped or deleted (a `start` opens a new GPU period), its container disk for as long
as it exists, stopped or not (RunPod bills the disk of a stopped pod). A deleted pod's
ledger stays, so billing keeps answering for TERMINATED pods. Queries follow the
contract of `GET /v2/billing/pods` and `GET /v2/billing`: `startTime` is snapped down
to the start of its bucket, `endTime` up to the end of its bucket, `lastN` means the
last N buckets ending with the current one and excludes both times, and the window
defaults to the last 30 days. The current bucket holds only what has been charged so
far. Each route takes its own filter only (`podId` on pods, `clusterId` on clusters,
`networkVolumeId` on network volumes): another route's filter is refused rather than
ignored, which would answer for every resource instead of the one asked for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.sim.runpod.validate import Problem

# USD per GB of container disk per hour (about $0.10 per GB-month).
DISK_USD_PER_GB_HOUR = 0.10 / (30 * 24)
BUCKET_SIZES = ("hour", "day", "week", "month", "year")
DEFAULT_WINDOW = timedelta(days=30)
# USD per cluster member per hour for the inter-node network, billed while the member's
# GPUs are (a stand-in figure: the contract names the component, not its price).
NETWORKING_USD_PER_POD_HOUR = 0.02
# Amounts are served with this many decimals, as a money API would.
AMOUNT_DECIMALS = 6


@dataclass
class PodLedger:
    """What one pod costs over time: GPU periods at its hourly price, disk while it exists.
    A CPU pod's compute periods are the same, billed as CPU (`cpu`)."""

    pod_id: str
    gpu_usd_per_hour: float
    disk_usd_per_hour: float
    created_at: datetime
    deleted_at: datetime | None = None
    cpu: bool = False
    cluster_id: str | None = None
    """Set for a cluster member, which is billed with its cluster, not as a pod."""
    gpu_periods: list[list[datetime | None]] = field(default_factory=list)

    def gpu_on(self, now: datetime) -> None:
        if not self.gpu_periods or self.gpu_periods[-1][1] is not None:
            self.gpu_periods.append([now, None])

    def gpu_off(self, now: datetime) -> None:
        if self.gpu_periods and self.gpu_periods[-1][1] is None:
            self.gpu_periods[-1][1] = now

    def delete(self, now: datetime) -> None:
        self.gpu_off(now)
        self.deleted_at = now

    def amounts(self, start: datetime, end: datetime) -> tuple[float, float]:
        """(gpu, disk) USD charged within [start, end)."""
        gpu_seconds = sum(
            _overlap(begin, stop or end, start, end)
            for begin, stop in self.gpu_periods
            if begin is not None
        )
        disk_seconds = _overlap(self.created_at, self.deleted_at or end, start, end)
        return (
            self.gpu_usd_per_hour * gpu_seconds / 3600,
            self.disk_usd_per_hour * disk_seconds / 3600,
        )

    def networking(self, start: datetime, end: datetime) -> float:
        """USD of a cluster member's inter-node network within [start, end)."""
        seconds = sum(
            _overlap(begin, stop or end, start, end)
            for begin, stop in self.gpu_periods
            if begin is not None
        )
        return NETWORKING_USD_PER_POD_HOUR * seconds / 3600


def _overlap(a_start: datetime, a_end: datetime, b_start: datetime, b_end: datetime) -> float:
    return max(0.0, (min(a_end, b_end) - max(a_start, b_start)).total_seconds())


def floor_bucket(moment: datetime, size: str) -> datetime:
    moment = moment.astimezone(UTC)
    if size == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if size == "day":
        return day
    if size == "week":  # ISO weeks start on Monday
        return day - timedelta(days=day.weekday())
    if size == "month":
        return day.replace(day=1)
    return day.replace(month=1, day=1)


def next_bucket(start: datetime, size: str) -> datetime:
    if size == "hour":
        return start + timedelta(hours=1)
    if size == "day":
        return start + timedelta(days=1)
    if size == "week":
        return start + timedelta(weeks=1)
    if size == "month":
        return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    return start.replace(year=start.year + 1)


def ceil_bucket(moment: datetime, size: str) -> datetime:
    start = floor_bucket(moment, size)
    return start if start == moment else next_bucket(start, size)


def buckets(start: datetime, end: datetime, size: str) -> Iterator[tuple[datetime, datetime]]:
    while start < end:
        following = next_bucket(start, size)
        yield start, following
        start = following


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    size: str
    now: datetime
    """When the query was answered: the current bucket bills only the time that has
    passed (an hour not yet over is not yet charged in full)."""

    def elapsed(self, end: datetime) -> datetime:
        return min(end, self.now)


def resolve_window(params: Mapping[str, str], now: datetime) -> Window:
    """The query's window per the contract's snapping rules; Problem on bad input."""
    size = params.get("bucketSize", "day")
    if size not in BUCKET_SIZES:
        raise Problem(
            422,
            "Request validation failed.",
            errors=[f"bucketSize: must be one of {', '.join(BUCKET_SIZES)}"],
        )
    if "lastN" in params:
        if "startTime" in params or "endTime" in params:
            raise Problem(400, "lastN is mutually exclusive with startTime/endTime")
        count = _positive_int(params["lastN"])
        end = next_bucket(floor_bucket(now, size), size)
        start = end
        for _ in range(count):
            start = floor_bucket(start - timedelta(seconds=1), size)
        return Window(start, end, size, now)
    start = _time_param(params, "startTime") or now - DEFAULT_WINDOW
    end = _time_param(params, "endTime") or now
    if end <= start:
        raise Problem(400, "endTime must be after startTime")
    return Window(floor_bucket(start, size), ceil_bucket(end, size), size, now)


FILTERS = ("podId", "clusterId", "networkVolumeId", "serverlessId")


def check_filters(params: Mapping[str, str], allowed: str | None) -> None:
    """400 for a filter of another billing route (`allowed` is this route's, if any)."""
    for name in FILTERS:
        if name in params and name != allowed:
            raise Problem(400, f"{name} is not a parameter of this route")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise Problem(422, "Request validation failed.", errors=["lastN: integer >= 1"])
    return value


def _time_param(params: Mapping[str, str], name: str) -> datetime | None:
    text = params.get(name)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise Problem(
            422, "Request validation failed.", errors=[f"{name}: RFC 3339 date-time with an offset"]
        )
    return moment.astimezone(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def pod_billing(
    ledgers: Mapping[str, PodLedger], window: Window, pod_id: str | None
) -> dict[str, Any]:
    """The body of `GET /v2/billing/pods`: one record per pod per bucket it was billed in."""
    billed: list[tuple[datetime, int, dict[str, Any]]] = []
    for order, ledger in enumerate(ledgers.values()):
        if ledger.cluster_id is not None or pod_id not in (None, ledger.pod_id):
            continue
        # Only the buckets of the pod's life can bill it: a window of years stays cheap.
        first = max(window.start, floor_bucket(ledger.created_at, window.size))
        last = min(window.end, ledger.deleted_at or window.end)
        for start, end in buckets(first, last, window.size):
            compute, disk = ledger.amounts(start, window.elapsed(end))
            if compute or disk:
                gpu, cpu = (0.0, compute) if ledger.cpu else (compute, 0.0)
                record = {
                    "startTime": iso(start),
                    "endTime": iso(end),
                    "podId": ledger.pod_id,
                    **_pod_amounts(gpu, cpu, disk),
                }
                billed.append((start, order, record))
    records = [record for _, _, record in sorted(billed, key=lambda item: item[:2])]
    totals = _pod_amounts(*(sum(r[k] for r in records) for k in _POD_PARTS))
    query = {
        "startTime": iso(window.start),
        "endTime": iso(window.end),
        "bucketSize": window.size,
        "podId": pod_id,
    }
    return {
        "records": records,
        "metadata": {
            "query": query,
            "recordCount": len(records),
            "uniquePodCount": len({r["podId"] for r in records}),
            "totals": totals,
        },
    }


_POD_PARTS = ("gpuAmount", "cpuAmount", "diskAmount")


def _pod_amounts(gpu: float, cpu: float, disk: float) -> dict[str, float]:
    parts = [round(amount, AMOUNT_DECIMALS) for amount in (gpu, cpu, disk)]
    return {
        "totalAmount": round(sum(parts), AMOUNT_DECIMALS),
        **dict(zip(_POD_PARTS, parts, strict=True)),
    }


_AGGREGATE_ZEROES = (
    "serverlessGpuAmount",
    "serverlessCpuAmount",
    "serverlessDiskAmount",
    "serverlessFeeAmount",
    "storageStandardAmount",
    "storageHighPerformanceAmount",
    "endpointAmount",
)


def account_billing(ledgers: Mapping[str, PodLedger], window: Window) -> dict[str, Any]:
    """The body of `GET /v2/billing`: every bucket of the window, pods and clusters being
    all we bill."""
    records: list[dict[str, Any]] = []
    for start, end in buckets(window.start, window.end, window.size):
        # pod GPU, CPU, disk; cluster GPU, disk, networking
        amounts = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        for ledger in ledgers.values():
            compute, disk = ledger.amounts(start, window.elapsed(end))
            if ledger.cluster_id is not None:
                amounts[3] += compute
                amounts[4] += disk
                amounts[5] += ledger.networking(start, window.elapsed(end))
                continue
            amounts[1 if ledger.cpu else 0] += compute
            amounts[2] += disk
        records.append(
            {"startTime": iso(start), "endTime": iso(end), **_aggregate_amounts(*amounts)}
        )
    totals = _aggregate_amounts(*(sum(r[k] for r in records) for k in _AGGREGATE_PARTS))
    query = {"startTime": iso(window.start), "endTime": iso(window.end), "bucketSize": window.size}
    return {
        "records": records,
        "metadata": {"query": query, "recordCount": len(records), "totals": totals},
    }


_AGGREGATE_PARTS = (
    "podGpuAmount",
    "podCpuAmount",
    "podDiskAmount",
    "clusterGpuAmount",
    "clusterDiskAmount",
    "clusterNetworkingAmount",
)


def _aggregate_amounts(*components: float) -> dict[str, float]:
    parts = [round(amount, AMOUNT_DECIMALS) for amount in components]
    amounts = {"totalAmount": round(sum(parts), AMOUNT_DECIMALS)}
    amounts.update(dict.fromkeys(_AGGREGATE_ZEROES, 0.0))
    amounts.update(zip(_AGGREGATE_PARTS, parts, strict=True))
    return amounts


_CLUSTER_PARTS = ("gpuAmount", "diskAmount", "networkingAmount")


def cluster_billing(
    ledgers: Mapping[str, PodLedger], window: Window, cluster_id: str | None
) -> dict[str, Any]:
    """The body of `GET /v2/billing/clusters`: one record per cluster per bucket it was
    billed in, its members' GPUs, disks and network summed."""
    members: dict[str, list[PodLedger]] = {}
    for ledger in ledgers.values():
        if ledger.cluster_id is not None and cluster_id in (None, ledger.cluster_id):
            members.setdefault(ledger.cluster_id, []).append(ledger)
    billed: list[tuple[datetime, int, dict[str, Any]]] = []
    for order, (cluster, cluster_ledgers) in enumerate(members.items()):
        first = max(window.start, floor_bucket(cluster_ledgers[0].created_at, window.size))
        for start, end in buckets(first, window.end, window.size):
            parts = [0.0, 0.0, 0.0]
            for ledger in cluster_ledgers:
                gpu, disk = ledger.amounts(start, window.elapsed(end))
                parts[0] += gpu
                parts[1] += disk
                parts[2] += ledger.networking(start, window.elapsed(end))
            if any(parts):
                times = {"startTime": iso(start), "endTime": iso(end)}
                record = {**times, "clusterId": cluster, **_cluster_amounts(*parts)}
                billed.append((start, order, record))
    records = [record for _, _, record in sorted(billed, key=lambda item: item[:2])]
    totals = _cluster_amounts(*(sum(r[k] for r in records) for k in _CLUSTER_PARTS))
    query = {
        "startTime": iso(window.start),
        "endTime": iso(window.end),
        "bucketSize": window.size,
        "clusterId": cluster_id,
    }
    return {
        "records": records,
        "metadata": {
            "query": query,
            "recordCount": len(records),
            "uniqueClusterCount": len({r["clusterId"] for r in records}),
            "totals": totals,
        },
    }


def _cluster_amounts(gpu: float, disk: float, networking: float) -> dict[str, float]:
    parts = [round(amount, AMOUNT_DECIMALS) for amount in (gpu, disk, networking)]
    return {
        "totalAmount": round(sum(parts), AMOUNT_DECIMALS),
        **dict(zip(_CLUSTER_PARTS, parts, strict=True)),
    }
