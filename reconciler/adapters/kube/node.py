"""The virtual Node: registering it, its status, and its heartbeat Lease."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from reconciler.adapters.kube.transport import (
    LEASES,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    KubeTransport,
    lease_object,
    micro_time,
    q,
)
from reconciler.core.domain import KubeObject

NODE_LEASE_NAMESPACE = "kube-node-lease"
# Like the kubelet's nodeStatusReportFrequency: an unchanged node status is rewritten this
# often, so its heartbeat times stay meaningful; the Lease is the real liveness signal.
NODE_STATUS_REPORT_SECONDS = 300


class Node:
    """The Node object and its heartbeat Lease in kube-node-lease."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def read(self, name: str) -> KubeObject | None:
        """The live Node (cordon, taints), or None when it is not registered."""
        return self._kube.get_optional(f"/api/v1/nodes/{q(name)}")

    def ensure(self, node: KubeObject) -> None:
        """Create the Node or bring it to `node`; writes nothing when nothing changed."""
        path = f"/api/v1/nodes/{q(node['metadata']['name'])}"
        current = self._kube.get_optional(path)
        if current is None:
            current = self._kube.request("POST", "/api/v1/nodes", body=node)
        metadata_patch = _node_metadata_patch(current, node)
        if metadata_patch:
            self._kube.request("PATCH", path, body=metadata_patch, content_type=MERGE_PATCH)
        status = _node_status_update(current.get("status") or {}, node.get("status") or {})
        if status is not None:
            self._kube.request(
                "PATCH",
                f"{path}/status",
                body={"status": status},
                content_type=STRATEGIC_MERGE_PATCH,
            )

    def renew_lease(self, node_name: str, duration_seconds: int = 40) -> datetime | None:
        """The node heartbeat: the Lease named after the node in kube-node-lease. Returns
        when it had last been renewed (None for a new Lease)."""
        collection = LEASES.format(namespace=NODE_LEASE_NAMESPACE)
        lease = self._kube.get_optional(f"{collection}/{q(node_name)}")
        spec = {
            "holderIdentity": node_name,
            "leaseDurationSeconds": duration_seconds,
            "renewTime": micro_time(self._kube.now()),
        }
        if lease is None:
            self._kube.request(
                "POST", collection, body=lease_object(NODE_LEASE_NAMESPACE, node_name, spec)
            )
            return None
        previous = (lease.get("spec") or {}).get("renewTime")
        lease["spec"] = {**(lease.get("spec") or {}), **spec}
        self._kube.request("PUT", f"{collection}/{q(node_name)}", body=lease)
        return datetime.fromisoformat(previous) if previous else None

    def lease_renewed_at(self, node_name: str) -> datetime | None:
        """When the node's heartbeat Lease was last renewed; None if it has none."""
        collection = LEASES.format(namespace=NODE_LEASE_NAMESPACE)
        lease = self._kube.get_optional(f"{collection}/{q(node_name)}")
        renewed = ((lease or {}).get("spec") or {}).get("renewTime")
        return datetime.fromisoformat(renewed) if renewed else None


def _node_metadata_patch(current: KubeObject, desired: KubeObject) -> KubeObject:
    """Labels and taints we own that are missing or differ; others' are left alone."""
    patch: KubeObject = {}
    labels = current["metadata"].get("labels") or {}
    changed = {
        k: v for k, v in (desired["metadata"].get("labels") or {}).items() if labels.get(k) != v
    }
    if changed:
        patch["metadata"] = {"labels": changed}
    taints = (current.get("spec") or {}).get("taints") or []
    missing = [t for t in (desired.get("spec") or {}).get("taints") or [] if t not in taints]
    if missing:
        patch["spec"] = {"taints": taints + missing}
    return patch


def _node_status_update(current: dict[str, Any], desired: dict[str, Any]) -> dict | None:
    """The status to write, or None when only heartbeat times differ and none is due."""
    old_conditions = {c.get("type"): c for c in current.get("conditions") or []}
    conditions = []
    for condition in desired.get("conditions") or []:
        old = old_conditions.get(condition.get("type"))
        if old and old.get("status") == condition.get("status"):
            # A transition time marks a change of status, not a rewrite of the same one.
            condition = {**condition, "lastTransitionTime": old.get("lastTransitionTime")}
        conditions.append(condition)
    wanted = {**desired, "conditions": conditions}
    same = _without_heartbeats(wanted) == _without_heartbeats({k: current.get(k) for k in wanted})
    if same and not _heartbeat_due(old_conditions, conditions):
        return None
    return (
        {**wanted, "addresses": _addresses_patch(current, wanted)}
        if "addresses" in wanted
        else wanted
    )


def _addresses_patch(current: dict[str, Any], wanted: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's addresses as a strategic merge patch: merged by type, so an address of
    a type no longer listed (the IP of a kubelet endpoint given up) needs a delete
    directive to go, as a kubelet's own status patch carries."""
    kept = {address.get("type") for address in wanted["addresses"]}
    gone = {address.get("type") for address in current.get("addresses") or []} - kept - {None}
    return [*wanted["addresses"], *({"$patch": "delete", "type": kind} for kind in sorted(gone))]


def _without_heartbeats(status: dict[str, Any]) -> dict[str, Any]:
    conditions = sorted(
        (
            {k: v for k, v in c.items() if k != "lastHeartbeatTime"}
            for c in status.get("conditions") or []
        ),
        key=lambda c: str(c.get("type")),
    )
    return {**status, "conditions": conditions}


def _heartbeat_due(old: dict[str, dict[str, Any]], conditions: list[dict[str, Any]]) -> bool:
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    previous = (old.get("Ready") or {}).get("lastHeartbeatTime")
    if ready is None or not previous or not ready.get("lastHeartbeatTime"):
        return ready is not None
    elapsed = datetime.fromisoformat(ready["lastHeartbeatTime"]) - datetime.fromisoformat(previous)
    return elapsed >= timedelta(seconds=NODE_STATUS_REPORT_SECONDS)
