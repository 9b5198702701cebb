"""How `reconciler state show` presents the mapping table: JSON for machines, a table for people."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from reconciler.adapters.store.models import Mapping

COLUMNS = ("NAMESPACE", "POD", "STATE", "INSTANCE", "GPU", "DC", "COST/H", "STATUS", "AGE", "NOTE")


def mapping_record(row: Mapping) -> dict[str, Any]:
    """Stable JSON keys; add new keys, never rename them (scripts read this)."""
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
        row.namespace, row.name, row.state.value, row.instance_id or "-",
        row.gpu_type_id or "-", row.datacenter_id or "-", cost,
        row.last_instance_status or "-", format_age(row.created_at, now),
        _shorten(row.last_error or ""),
    )


def render_table(rows: Sequence[tuple[str, ...]], header: Sequence[str] = COLUMNS) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
             for line in (tuple(header), *rows)]
    return "\n".join(lines)


def _shorten(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
