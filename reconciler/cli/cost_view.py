"""`reconciler cost`: what RunPod charged for our instances, network volumes and Instant
Clusters, grouped, as a table or JSON.

The figures are RunPod's own (`GET /v2/billing/pods`, `/network-volumes`, `/clusters`:
whole hours, each read at most once an hour by the reconciler), mapped to pods through
the mapping rows and to claims and Jobs through the rows of whose each volume and
cluster is; the command itself sends RunPod nothing. A charge of ours that nothing maps
is shown as unmapped, never dropped. Per pod, the charge is compared with list price
times lifetime: a difference above 10% is flagged, which is how a leak or a wrong price
shows.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.adapters.store.models import GoneBilled, ListedVolume, Mapping
from reconciler.adapters.store.queries import ResourceSpendLine, SpendLine
from reconciler.cli.state_view import NO_POD
from reconciler.core.mapping import MappingRow
from reconciler.core.money.attribution import Billed
from reconciler.core.money.charges import billed_list_price, mismatched, unbilled_list_price
from reconciler.core.resources import storage_prices

GROUPS = ("pod", "namespace", "gpu")
UNMAPPED = "(unmapped)"
POD = "pod"
"""The kind of an instance's charge; a network volume's and a cluster's are
`core.money.attribution.Billed`'s values."""
RESOURCE_KINDS = tuple(kind.value for kind in Billed)
"""The built-in billing routes read apart from the pods' (each has its own reach)."""
_DURATION = re.compile(r"^(\d+)([mhd])$")
_UNITS = {"m": 60, "h": 3600, "d": 86400}


def resource_reaches(
    reaches: dict[str, datetime], pods_route: str = "pods"
) -> dict[str, datetime | None]:
    """How far each route apart from the pods' was read: the built-in kinds always (None:
    never read yet), then any other kind a resource's billing route keeps (a plug-in's),
    known from the billing tables alone (this command builds no resource)."""
    found: dict[str, datetime | None] = {kind: reaches.get(kind) for kind in RESOURCE_KINDS}
    for kind in sorted(reaches):
        if kind != pods_route:
            found.setdefault(kind, reaches[kind])
    return found


def parse_since(text: str, now: datetime) -> datetime:
    """`30m`, `24h`, `7d` (ago), or an ISO date or date-time (UTC unless it says)."""
    match = _DURATION.match(text.strip())
    if match:
        return now - timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f'"{text}" is neither a duration like 7d, 24h, 30m nor an ISO date'
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@dataclass(frozen=True)
class ChargeLine:
    """One billed hour of anything of ours: a pod's instance, a claim's network volume
    (its type as the detail) or a Job's Instant Cluster (its GPU type)."""

    kind: str
    usd: float
    namespace: str | None
    """None: nothing maps the charge (shown as unmapped)."""
    name: str | None
    detail: str | None


def charges(
    pods: Sequence[SpendLine], resources: Sequence[ResourceSpendLine] = ()
) -> list[ChargeLine]:
    found = [
        ChargeLine(POD, line.usd, _pod_namespace(line), line.name, line.gpu_type_id)
        for line in pods
    ]
    found += [
        ChargeLine(line.kind, line.usd, line.namespace, line.name, line.detail)
        for line in resources
    ]
    return found


def _pod_namespace(line: SpendLine) -> str | None:
    """None: no row maps the instance; an orphan's row knows its pod's UID alone."""
    if not line.pod_uid:
        return None
    return line.namespace or NO_POD


@dataclass
class CostRow:
    key: str
    kind: str | None = None
    """What was billed (pod, network-volume, cluster); None in the namespace grouping,
    which sums them all."""
    usd: float = 0.0
    list_usd: float | None = None
    mismatch: bool = False


def group(lines: Sequence[ChargeLine], by: str) -> list[CostRow]:
    rows: dict[tuple[str | None, str], CostRow] = {}
    for line in lines:
        kind = None if by == "namespace" else line.kind
        key = _key(line, by)
        rows.setdefault((kind, key), CostRow(key, kind)).usd += line.usd
    return sorted(rows.values(), key=lambda row: (-row.usd, row.key, row.kind or ""))


def _key(line: ChargeLine, by: str) -> str:
    if line.namespace is None:
        return UNMAPPED
    if by == "namespace":
        return line.namespace
    if by == "gpu":
        return line.detail or UNMAPPED
    return f"{line.namespace}/{line.name}"


def flag_mismatches(
    rows: list[CostRow],
    mappings: Sequence[Mapping],
    lines: Sequence[SpendLine],
    covered_until: datetime | None,
) -> None:
    """Per pod: compare the charge with list price times lifetime, over whole lives only.

    A pod counts once billing has been read past its end (or up to now, while it runs).
    """
    if covered_until is None:
        return
    charged: dict[str, float] = defaultdict(float)
    for line in lines:
        if line.pod_uid is not None:
            charged[line.pod_uid] += line.usd
    by_key = {f"{m.namespace}/{m.name}": m for m in mappings}
    for row in rows:
        mapping = by_key.get(row.key)
        if mapping is None or row.kind != POD:
            continue
        row.list_usd = billed_list_price(_mapping_row(mapping), covered_until)
        row.mismatch = mismatched(charged[mapping.pod_uid], row.list_usd)


def _mapping_row(mapping: Mapping) -> MappingRow:
    return MappingRow(
        mapping.pod_uid,
        mapping.namespace,
        mapping.name,
        mapping.state,
        mapping.created_at,
        mapping.updated_at,
        instance_id=mapping.instance_id,
        attempt_started_at=mapping.attempt_started_at,
        cost_per_hr=mapping.cost_per_hr,
        ended_at=mapping.ended_at,
    )


def record(
    rows: Sequence[CostRow], by: str, since: datetime | None, covered_until: datetime | None
) -> dict[str, Any]:
    """Stable JSON keys; add new keys, never rename them (scripts read this)."""
    entries = []
    for row in rows:
        entry: dict[str, Any] = {by: row.key, "usd": round(row.usd, 2)}
        if row.kind is not None:
            entry["kind"] = row.kind
        if by == "pod":
            entry["list_usd"] = None if row.list_usd is None else round(row.list_usd, 2)
            entry["mismatch"] = row.mismatch
        entries.append(entry)
    return {
        "total_usd": round(sum(row.usd for row in rows), 2),
        "by": by,
        "since": since.isoformat() if since else None,
        "billed_until": covered_until.isoformat() if covered_until else None,
        "rows": entries,
    }


def table(rows: Sequence[CostRow], by: str) -> list[tuple[str, ...]]:
    lines = []
    for row in rows:
        cells = [row.key, f"${row.usd:.2f}"]
        if row.kind is not None:
            cells.insert(1, row.kind)
        if by == "pod":
            listed = "-" if row.list_usd is None else f"${row.list_usd:.2f}"
            cells += [listed, "differs by >10%" if row.mismatch else ""]
        lines.append(tuple(cells))
    return lines


def header(by: str) -> tuple[str, ...]:
    if by == "pod":
        return ("POD, CLAIM OR JOB", "KIND", "CHARGED", "LIST PRICE", "NOTE")
    if by == "gpu":
        return ("GPU OR STORAGE TYPE", "KIND", "CHARGED")
    return (by.upper(), "CHARGED")


def unbilled(
    mappings: Sequence[Mapping],
    covered_until: datetime | None,
    now: datetime,
    since: datetime | None,
) -> dict[str, float]:
    """Per pod (namespace/name, largest first): list price times the part of its
    instance's life that billing has not covered yet; pods with none left out."""
    found: dict[str, float] = defaultdict(float)
    for mapping in mappings:
        usd = unbilled_list_price(_mapping_row(mapping), covered_until, now, since)
        if usd > 0:
            found[f"{mapping.namespace}/{mapping.name}"] += usd
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))


def unbilled_lines(by_pod: dict[str, float]) -> list[str]:
    if not by_pod:
        return []
    return [
        f"\nnot billed yet, at list price (an estimate: RunPod bills whole hours, read "
        f"hourly): {_usd(sum(by_pod.values()))}",
        *(f"  {pod}  {_usd(usd)}" for pod, usd in by_pod.items()),
    ]


def _usd(usd: float) -> str:
    """Cents, or tenths of a cent below one: a pod of the last minute costs less."""
    return f"${usd:.2f}" if usd >= 0.01 else f"${usd:.4f}"


def leaked_volumes(rows: Sequence[ListedVolume]) -> list[dict[str, Any]]:
    """Volumes of ours nothing uses, as the reconciler's last audit found them: they bill
    whether or not an hour of billing has been read yet."""
    return [
        {
            "id": row.volume_id,
            "name": row.name,
            "size_gb": row.size_gb,
            "type": row.type,
            "usd_per_hour": round(storage_prices.hourly_usd(row.size_gb, row.type), 4),
            "since": row.leaked_since.isoformat() if row.leaked_since else None,
        }
        for row in rows
    ]


def leak_lines(leaks: Sequence[dict[str, Any]]) -> list[str]:
    return [
        f"leaked network volume {leak['id']} ({leak['name']}, {leak['size_gb']} GB): "
        f"${leak['usd_per_hour']:.4f}/h since {leak['since']}; no PV or claim uses it"
        for leak in leaks
    ]


def charged_gone(rows: Sequence[GoneBilled]) -> list[dict[str, Any]]:
    """Ids RunPod charges that it neither lists nor answers for, whoever's they were."""
    return [
        {
            "kind": row.kind,
            "id": row.resource_id,
            "usd_last_hour": round(row.charged_usd or 0.0, 4),
            "gone_since": row.gone_since.isoformat(),
            "named_by": row.named_by,
        }
        for row in rows
    ]


def charged_gone_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [
        f"charged but gone: {row['kind']} {row['id']} ${row['usd_last_hour']:.2f} in the last "
        f"hour, not listed nor answered since {row['gone_since']}"
        + (f" ({row['named_by']} names it)" if row["named_by"] else "")
        for row in rows
    ]
