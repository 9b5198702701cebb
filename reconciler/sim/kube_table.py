"""Server-side printing: the `Table` kubectl asks for when it prints `kubectl get`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from reconciler.sim.kube_resources import NODES, PODS, Resource
from reconciler.sim.kube_store import Page

Cells = Callable[[dict[str, Any]], list[Any]]


def table_for(resource: Resource, page: Page, now: datetime) -> dict[str, Any]:
    columns, cells = _COLUMNS.get(resource, ((), _no_cells))
    metadata = {"resourceVersion": page.resource_version}
    if page.continue_token:
        metadata["continue"] = page.continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [
            {"name": name, "type": kind, "format": "name" if name == "Name" else "",
             "description": name, "priority": 0}
            for name, kind in (("Name", "string"), *columns, ("Age", "string"))
        ],
        "rows": [_row(entry.obj, cells, now) for entry in page.items],
    }


def _row(obj: dict[str, Any], cells: Cells, now: datetime) -> dict[str, Any]:
    meta = obj["metadata"]
    partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    return {"cells": [meta["name"], *cells(obj), _age(meta["creationTimestamp"], now)],
            "object": partial}


def _pod_cells(pod: dict[str, Any]) -> list[Any]:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    total = len(pod.get("spec", {}).get("containers") or [])
    phase = pod.get("status", {}).get("phase", "Unknown")
    if "deletionTimestamp" in pod["metadata"]:
        phase = "Terminating"
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    return [f"{ready}/{total}", phase, restarts]


def _node_cells(node: dict[str, Any]) -> list[Any]:
    conditions = node.get("status", {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    labels = node["metadata"].get("labels") or {}
    roles = labels.get("kubernetes.io/role", "<none>")
    version = node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")
    return ["Ready" if ready else "NotReady", roles, version]


def _no_cells(obj: dict[str, Any]) -> list[Any]:
    return []


def _age(created: str, now: datetime) -> str:
    seconds = int((now - datetime.fromisoformat(created)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{max(0, seconds)}s"


_COLUMNS: dict[Resource, tuple[tuple[tuple[str, str], ...], Cells]] = {
    PODS: ((("Ready", "string"), ("Status", "string"), ("Restarts", "integer")), _pod_cells),
    NODES: ((("Status", "string"), ("Roles", "string"), ("Version", "string")), _node_cells),
}
