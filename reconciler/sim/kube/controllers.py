"""The kube-controller-manager loops that act on a node whose kubelet stops reporting.

Run on the simulator's clock (`SimClock.every`), so a test that advances time sees them
act at the moment they would. Modelled from the upstream controllers:

- node lifecycle (every 5 s): a node whose Lease was not renewed and whose Ready
  heartbeat did not change for `node_monitor_grace_period` (50 s since 1.32) gets every
  condition set to Unknown (`NodeStatusUnknown`) and its pods' Ready condition False.
  Taints follow the Ready condition (`node.kubernetes.io/unreachable` for Unknown,
  `not-ready` for False, NoExecute with `timeAdded` and NoSchedule), and
  `node.kubernetes.io/unschedulable:NoSchedule` follows `spec.unschedulable`.
- taint eviction: a pod on a node with a NoExecute taint it does not tolerate is
  deleted at once; one it tolerates with `tolerationSeconds` is deleted that long after
  the taint was first seen (the shortest of the tolerations used); without a limit, never.
- cloud node lifecycle (switchable, as only managed clouds run it): a node that is not
  Ready and that the cloud does not know (`cloud_nodes`) is deleted.
- pod garbage collection (every 20 s): the pods of a node that has been missing for the
  40 s quarantine are marked Failed (`DeletionByPodGC`) and deleted at once.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.sim.clock import SimClock, Timer
from reconciler.sim.kube.resources import LEASES, NODES, PODS
from reconciler.sim.kube.select import Selector
from reconciler.sim.kube.status import ApiError
from reconciler.sim.kube.store import Store, format_time

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_CONDITION_TAINTS = {"Unknown": UNREACHABLE, "False": NOT_READY}
_MANAGED_KEYS = (UNREACHABLE, NOT_READY, UNSCHEDULABLE)
_NODE_LEASE_NAMESPACE = "kube-node-lease"


@dataclass
class ControllerSettings:
    node_monitor_period: float = 5
    node_monitor_grace_period: float = 50
    cloud_node_lifecycle: bool = False
    """Delete NotReady nodes the cloud does not know, as a managed cloud's controller does."""
    cloud_nodes: set[str] = field(default_factory=set)
    """Nodes the cloud provider knows (a virtual node is never one of them)."""
    pod_gc_period: float = 20
    pod_gc_quarantine: float = 40


@dataclass
class _Health:
    lease_renewed: str | None
    heartbeat: str | None
    observed: datetime


class NodeControllers:
    def __init__(
        self, store: Store, clock: SimClock, settings: ControllerSettings | None = None
    ) -> None:
        self.store, self.clock = store, clock
        self.settings = settings or ControllerSettings()
        self._health: dict[str, _Health] = {}
        self._evictions: dict[tuple[str, str], datetime] = {}
        self._missing_nodes: dict[str, datetime] = {}
        self._timers: list[Timer] = []

    def start(self) -> NodeControllers:
        self._timers = [
            self.clock.every(self.settings.node_monitor_period, self.monitor),
            self.clock.every(self.settings.pod_gc_period, self.collect_pods),
        ]
        return self

    def stop(self) -> None:
        for timer in self._timers:
            self.clock.cancel(timer)
        self._timers = []

    # node lifecycle ---------------------------------------------------------------

    def monitor(self) -> None:
        with self.store.lock:
            nodes = self._all(NODES)
            present = {entry.obj["metadata"]["name"] for entry in nodes}
            self._health = {k: v for k, v in self._health.items() if k in present}
            for entry in nodes:
                node = entry.obj
                self._check_health(node)
                node = self.store.get(NODES, None, node["metadata"]["name"])
                self._sync_taints(node)
                node = self.store.get(NODES, None, node["metadata"]["name"])
                if self.settings.cloud_node_lifecycle and self._gone_from_cloud(node):
                    self.store.delete(NODES, None, node["metadata"]["name"])
                    continue
                self._evict_intolerant_pods(node)

    def _check_health(self, node: dict[str, Any]) -> None:
        name, now = node["metadata"]["name"], self.clock.now()
        lease = self.store.find(LEASES, _NODE_LEASE_NAMESPACE, name)
        renewed = (lease.obj.get("spec") or {}).get("renewTime") if lease else None
        heartbeat = (_condition(node, "Ready") or {}).get("lastHeartbeatTime")
        seen = self._health.get(name)
        if seen is None or (seen.lease_renewed, seen.heartbeat) != (renewed, heartbeat):
            self._health[name] = seen = _Health(renewed, heartbeat, now)
        grace = timedelta(seconds=self.settings.node_monitor_grace_period)
        ready = _condition(node, "Ready")
        if now - seen.observed <= grace or (ready or {}).get("status") == "Unknown":
            return
        updated = copy.deepcopy(node)
        stamp = format_time(now)
        conditions = updated.setdefault("status", {}).setdefault("conditions", [])
        if ready is None:
            conditions.append({"type": "Ready", "lastHeartbeatTime": stamp})
        for condition in conditions:
            condition.update(
                status="Unknown",
                reason="NodeStatusUnknown",
                message="Kubelet stopped posting node status.",
                lastTransitionTime=stamp,
            )
        self.store.update(NODES, None, name, updated, "status")
        self._health[name] = _Health(
            renewed, (_condition(updated, "Ready") or {}).get("lastHeartbeatTime"), seen.observed
        )
        self._mark_pods_not_ready(name)

    def _mark_pods_not_ready(self, node_name: str) -> None:
        for pod in self._pods_on(node_name):
            ready = _condition(pod, "Ready")
            if ready is None or ready.get("status") == "False":
                continue
            updated = copy.deepcopy(pod)
            for condition in updated["status"]["conditions"]:
                if condition.get("type") == "Ready":
                    condition.update(
                        status="False", lastTransitionTime=format_time(self.clock.now())
                    )
            self._write_pod_status(updated)

    def _sync_taints(self, node: dict[str, Any]) -> None:
        spec = node.get("spec") or {}
        wanted: list[tuple[str, str]] = []
        condition_taint = _CONDITION_TAINTS.get(
            (_condition(node, "Ready") or {}).get("status", "Unknown")
        )
        if condition_taint:
            wanted += [(condition_taint, "NoExecute"), (condition_taint, "NoSchedule")]
        if spec.get("unschedulable"):
            wanted.append((UNSCHEDULABLE, "NoSchedule"))
        taints = spec.get("taints") or []
        kept = [
            t
            for t in taints
            if t.get("key") not in _MANAGED_KEYS or (t.get("key"), t.get("effect")) in wanted
        ]
        present = {(t.get("key"), t.get("effect")) for t in kept}
        stamp = format_time(self.clock.now())
        added = [
            {
                "key": key,
                "effect": effect,
                **({"timeAdded": stamp} if effect == "NoExecute" else {}),
            }
            for key, effect in wanted
            if (key, effect) not in present
        ]
        if kept == taints and not added:
            return
        updated = copy.deepcopy(node)
        updated["spec"]["taints"] = kept + added
        self.store.update(NODES, None, node["metadata"]["name"], updated)

    def _gone_from_cloud(self, node: dict[str, Any]) -> bool:
        ready = (_condition(node, "Ready") or {}).get("status")
        return ready != "True" and node["metadata"]["name"] not in self.settings.cloud_nodes

    # taint eviction ---------------------------------------------------------------

    def _evict_intolerant_pods(self, node: dict[str, Any]) -> None:
        now = self.clock.now()
        taints = [
            t
            for t in (node.get("spec") or {}).get("taints") or []
            if t.get("effect") == "NoExecute"
        ]
        for pod in self._pods_on(node["metadata"]["name"]):
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if not taints or "deletionTimestamp" in pod["metadata"]:
                self._evictions.pop(key, None)
                continue
            limit = _toleration_limit(taints, (pod.get("spec") or {}).get("tolerations") or [])
            if limit is not None and limit < 0:
                self._evictions.pop(key, None)
                continue
            since = self._evictions.setdefault(key, now)
            if limit is None or now >= since + timedelta(seconds=limit):
                self._evictions.pop(key, None)
                self.store.disrupt(
                    *key, "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"
                )
                self.store.delete(PODS, *key)

    # pod garbage collection -------------------------------------------------------

    def collect_pods(self) -> None:
        now = self.clock.now()
        with self.store.lock:
            nodes = {entry.obj["metadata"]["name"] for entry in self._all(NODES)}
            orphaned: dict[str, list[dict[str, Any]]] = {}
            for entry in self._all(PODS):
                node_name = (entry.obj.get("spec") or {}).get("nodeName")
                if node_name and node_name not in nodes:
                    orphaned.setdefault(node_name, []).append(entry.obj)
            self._missing_nodes = {name: self._missing_nodes.get(name, now) for name in orphaned}
            quarantine = timedelta(seconds=self.settings.pod_gc_quarantine)
            for name, pods in orphaned.items():
                if now - self._missing_nodes[name] < quarantine:
                    continue
                for pod in pods:
                    key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                    self.store.disrupt(
                        *key, "DeletionByPodGC", "PodGC: node no longer exists", fail=True
                    )
                    self.store.delete(PODS, *key, 0)

    # helpers ----------------------------------------------------------------------

    def _all(self, resource: Any) -> list[Any]:
        return list(self.store.list_page(resource, None, Selector()).items)

    def _pods_on(self, node_name: str) -> list[dict[str, Any]]:
        return [
            entry.obj
            for entry in self._all(PODS)
            if (entry.obj.get("spec") or {}).get("nodeName") == node_name
        ]

    def _write_pod_status(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            self.store.update(PODS, meta["namespace"], meta["name"], pod, "status")
        except ApiError:
            return  # changed meanwhile: the next pass sees the new version


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def _toleration_limit(
    taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]
) -> float | None:
    """Seconds the pod may stay: None if a taint is not tolerated, -1 for ever.

    As upstream: per taint the first toleration that matches it, then the shortest
    `tolerationSeconds` among those (zero or less means at once)."""
    used = []
    for taint in taints:
        match = next((t for t in tolerations if _tolerates(t, taint)), None)
        if match is None:
            return None
        used.append(match)
    limits = [float(t["tolerationSeconds"]) for t in used if t.get("tolerationSeconds") is not None]
    if not limits:
        return -1
    return max(0.0, min(limits))


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")
