"""How `reconciler state show` presents the mapping table: JSON for machines, a table for people."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from reconciler.adapters.store.models import (
    InstantCluster,
    Mapping,
    NamespaceBudget,
    Tick,
    UnownedInstance,
)
from reconciler.core.printable import escaped

COLUMNS = ("NAMESPACE", "POD", "STATE", "INSTANCE", "GPU", "DC", "COST/H", "STATUS", "AGE", "NOTE")


NO_POD = "(no pod)"
"""Shown for the namespace of a row whose pod was never seen: an orphan (an instance
with our tags whose pod is gone), known by its pod UID tag alone."""


def mapping_record(row: Mapping, gpu_utilization: Sequence[float] | None = None) -> dict[str, Any]:
    """Stable JSON keys; add new keys, never rename them (scripts read this).
    `gpu_utilization`: each GPU's, 0-1, at the last tick (None: not a running GPU pod)."""
    return {
        "pod_uid": row.pod_uid,
        "namespace": row.namespace,
        "name": row.name,
        "state": row.state.value,
        "instance_id": row.instance_id,
        "instance_name": row.instance_name,
        "gpu_type": row.gpu_type_id,
        "datacenter": row.datacenter_id,
        "cost_per_hr": row.cost_per_hr,
        "instance_status": row.last_instance_status,
        "exit_code": row.exit_code,
        "orphan_sightings": row.orphan_sightings,
        "last_error": row.last_error,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
        "ended_at": row.ended_at.isoformat() if row.ended_at else None,
        "gpu_utilization": list(gpu_utilization) if gpu_utilization is not None else None,
    }


def format_age(since: datetime, now: datetime) -> str:
    """kubectl-style age: 45s, 12m, 3h, 5d."""
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def table_row(row: Mapping, now: datetime) -> tuple[str, ...]:
    cost = "-" if row.cost_per_hr is None else f"${row.cost_per_hr:.2f}"
    return (
        row.namespace or NO_POD,
        row.name,
        row.state.value,
        row.instance_id or "-",
        row.gpu_type_id or "-",
        row.datacenter_id or "-",
        cost,
        row.last_instance_status or "-",
        format_age(row.created_at, now),
        _shorten(row.last_error or ""),
    )


def render_table(rows: Sequence[tuple[str, ...]], header: Sequence[str] = COLUMNS) -> str:
    """Cells with their control characters escaped: a newline in a name or a message
    (anyone's to write) must not forge a row, nor an escape sequence reach the terminal."""
    rows = [tuple(escaped(cell) for cell in row) for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in (tuple(header), *rows)
    ]
    return "\n".join(lines)


def _shorten(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


LIVE_STATES = ("creating", "running", "terminating")


def money_lines(
    rows: Sequence[Mapping],
    spend_by_instance: dict[str, float],
    budgets: Sequence[NamespaceBudget],
    unowned: Sequence[UnownedInstance],
    billed_until: datetime | None,
) -> list[str]:
    """The footer of `state show`: spend, namespace use against caps, look-alikes."""
    lines = []
    total = sum(spend_by_instance.values())
    until = (
        f" (billed through {billed_until:%Y-%m-%d %H:%M} UTC)"
        if billed_until
        else " (no billing read yet)"
    )
    lines.append(f"spend: ${total:.2f} charged by RunPod{until}")
    use: dict[str, tuple[int, float]] = {}
    for row in rows:
        if row.state.value in LIVE_STATES:
            count, cost = use.get(row.namespace, (0, 0.0))
            use[row.namespace] = (count + 1, cost + (row.cost_per_hr or 0.0))
    for budget in budgets:
        count, cost = use.get(budget.namespace, (0, 0.0))
        caps = [
            f"{count}/{budget.max_instances if budget.max_instances is not None else '-'} "
            "instances",
            f"${cost:.2f}/h of "
            + (f"${budget.max_hourly_spend:.2f}/h" if budget.max_hourly_spend is not None else "-"),
        ]
        note = f" ({budget.error})" if budget.error else ""
        lines.append(f"namespace {budget.namespace}: " + ", ".join(caps) + note)
    for item in unowned:
        lines.append(
            f"unowned, looks like ours: instance {item.instance_id} ({item.name}), "
            f"like pod {item.namespace}/{item.pod_name}; left alone"
        )
    return lines


def gpu_utilization_of(tick: Tick | None) -> dict[str, list[float]]:
    """The last tick's GPU utilization by "<namespace>/<pod>"."""
    if tick is None or not tick.gpu_utilization:
        return {}
    return {
        key: [float(r) for r in ratios] for key, ratios in json.loads(tick.gpu_utilization).items()
    }


def gpu_lines(utilization: dict[str, list[float]], rows: Sequence[Mapping]) -> list[str]:
    """One line per GPU pod shown: its GPUs' utilization at the last tick."""
    return [
        f"gpu utilization {key}: " + ", ".join(f"GPU {n} {r:.0%}" for n, r in enumerate(ratios))
        for row in rows
        if (ratios := utilization.get(key := f"{row.namespace}/{row.name}"))
    ]


def unowned_record(item: UnownedInstance) -> dict[str, Any]:
    return {
        "pod_uid": None,
        "namespace": item.namespace,
        "name": item.pod_name,
        "state": "unowned-lookalike",
        "instance_id": item.instance_id,
        "instance_name": item.name,
        "note": "unowned, looks like ours",
        "first_seen_at": item.first_seen_at.isoformat(),
    }


def cluster_lines(clusters: Sequence[InstantCluster], now: datetime) -> list[str]:
    """One line per gang's Instant Cluster (its pods are not in the table above)."""
    lines = []
    for row in clusters:
        shape = f"{row.pod_count} x {row.gpu_type_id}" if row.gpu_type_id else "-"
        cost = "" if row.cost_per_hr is None else f", ${row.cost_per_hr:.2f}/h"
        note = f" ({row.message})" if row.message else ""
        lines.append(
            f"cluster {row.cluster_id or '-'} of Job {row.namespace}/{row.job_name}: "
            f"{row.state.value}, {shape}{cost}, "
            f"{format_age(row.attempt_started_at, now)}{note}"
        )
    return lines


def cluster_record(row: InstantCluster) -> dict[str, Any]:
    return {
        "pod_uid": None,
        "namespace": row.namespace,
        "name": row.job_name,
        "state": f"cluster-{row.state.value}",
        "instance_id": row.cluster_id,
        "gang": row.gang,
        "gpu_type": row.gpu_type_id,
        "pod_count": row.pod_count,
        "cost_per_hr": row.cost_per_hr,
        "note": row.message,
        "created_at": row.attempt_started_at.isoformat(),
    }
