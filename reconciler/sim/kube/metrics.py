"""`metrics.k8s.io/v1beta1` as metrics-server serves it, so that the real `kubectl top`
works against the simulator.

Like metrics-server it scrapes each Node's kubelet at the address the API server would
use (`pod_log.kubelet_location`: preferred address type, daemonEndpoints port) on
`/metrics/resource`, with the API server's kubelet client certificate, and decodes the
Prometheus text as metrics-server's decoder does (kubernetes-sigs/metrics-server
`pkg/scraper/client/resource/decode.go`): CPU is a counter of core-seconds whose rate
between the last two scrapes (by the samples' timestamps) is the usage; a node whose CPU
or memory is 0 is dropped, and so is a pod with any container whose CPU or memory is 0,
or whose container restarted between the scrapes.

A scrape happens at every read of the API and on `scrape()`: the first read after one
scrape has a rate; the very first has none ("metrics not available yet").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests

from reconciler.sim.kube.pod_log import KubeletCaller, kubelet_location
from reconciler.sim.kube.resources import NODES
from reconciler.sim.kube.select import Selector
from reconciler.sim.kube.status import ApiError, not_found

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+(\d+))?$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Key = tuple[str, str, str]  # namespace, pod, container


@dataclass
class Scrape:
    """One decoded `/metrics/resource`: node and container points (seconds, value)."""

    node_cpu: tuple[float, float] | None = None
    node_memory: float = 0.0
    cpu: dict[Key, tuple[float, float]] = field(default_factory=dict)
    memory: dict[Key, float] = field(default_factory=dict)
    start: dict[Key, float] = field(default_factory=dict)


def decode(text: str) -> Scrape:
    scrape = Scrape()
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None or line.startswith("#"):
            continue
        name, labels, value, stamp = match.groups()
        point = (int(stamp) / 1000 if stamp else 0.0, float(value))
        tags = dict(_LABEL.findall(labels or ""))
        key = (tags.get("namespace", ""), tags.get("pod", ""), tags.get("container", ""))
        if name == "node_cpu_usage_seconds_total":
            scrape.node_cpu = point
        elif name == "node_memory_working_set_bytes":
            scrape.node_memory = point[1]
        elif name == "container_cpu_usage_seconds_total":
            scrape.cpu[key] = point
        elif name == "container_memory_working_set_bytes":
            scrape.memory[key] = point[1]
        elif name == "container_start_time_seconds":
            scrape.start[key] = point[1]
    return scrape


class MetricsServer:
    def __init__(self, sim: KubeletCaller) -> None:
        self.sim = sim
        self._scrapes: dict[str, list[Scrape]] = {}
        """The last two scrapes of each node, oldest first."""

    def scrape(self) -> None:
        for entry in list(self.sim.store.list_page(NODES, None, Selector()).items):
            node = entry.obj
            try:
                host, port = kubelet_location(node)
                answer = requests.get(
                    f"https://{host}:{port}/metrics/resource",
                    timeout=5,
                    cert=self.sim.kubelet_client_files(),
                    verify=self.sim.kubelet_ca_file or False,
                )
            except (ApiError, requests.RequestException):
                continue  # metrics-server logs it and serves the node's last figures
            if answer.status_code != 200:
                continue
            scrape = decode(answer.text)
            kept = self._scrapes.setdefault(node["metadata"]["name"], [])
            if kept and scrape.node_cpu == kept[-1].node_cpu:
                continue  # nothing new since (the same samples)
            self._scrapes[node["metadata"]["name"]] = [*kept, scrape][-2:]

    def answer(self, path: str) -> dict[str, Any]:
        """The object or list at `path` under /apis/metrics.k8s.io/v1beta1."""
        self.scrape()
        parts = [p for p in path.split("/") if p][3:]
        namespace = parts[1] if len(parts) >= 3 and parts[0] == "namespaces" else None
        rest = parts[2:] if namespace is not None else parts
        if not rest or rest[0] not in ("pods", "nodes") or len(rest) > 2:
            raise ApiError(404, "the server could not find the requested resource")
        kind = "PodMetrics" if rest[0] == "pods" else "NodeMetrics"
        items = self._pods() if rest[0] == "pods" else self._nodes()
        items = [
            i for i in items if namespace is None or i["metadata"].get("namespace") == namespace
        ]
        if len(rest) == 2:
            found = [i for i in items if i["metadata"]["name"] == rest[1]]
            if not found:
                raise not_found(f"{rest[0]}.{GROUP}", rest[1])
            return found[0]
        return {"kind": f"{kind}List", "apiVersion": API_VERSION, "metadata": {}, "items": items}

    def _nodes(self) -> list[dict[str, Any]]:
        items = []
        for name, (old, new) in self._pairs():
            if old.node_cpu is None or new.node_cpu is None or new.node_memory == 0:
                continue
            rate = _rate(old.node_cpu, new.node_cpu)
            if rate is None or rate == 0:
                continue
            items.append(
                _metrics("NodeMetrics", {"name": name}, new.node_cpu[0], old.node_cpu[0])
                | {"usage": _usage(rate, new.node_memory)}
            )
        return items

    def _pods(self) -> list[dict[str, Any]]:
        items = []
        for _, (old, new) in self._pairs():
            pods: dict[tuple[str, str], list[dict[str, Any]] | None] = {}
            for key, point in new.cpu.items():
                before = old.cpu.get(key)
                rate = _rate(before, point) if before is not None else None
                memory = new.memory.get(key, 0.0)
                restarted = new.start.get(key) != old.start.get(key)
                containers = pods.setdefault(key[:2], [])
                if rate is None or rate == 0 or memory == 0 or restarted or containers is None:
                    pods[key[:2]] = None  # one container without figures drops the pod
                    continue
                containers.append({"name": key[2], "usage": _usage(rate, memory)})
            for (namespace, pod), containers in pods.items():
                if containers:
                    stamps = next(
                        (old.cpu[k][0], new.cpu[k][0]) for k in new.cpu if k[:2] == (namespace, pod)
                    )
                    meta = {"name": pod, "namespace": namespace}
                    items.append(
                        _metrics("PodMetrics", meta, stamps[1], stamps[0])
                        | {"containers": containers}
                    )
        return items

    def _pairs(self) -> list[tuple[str, tuple[Scrape, Scrape]]]:
        return [(n, (s[0], s[1])) for n, s in self._scrapes.items() if len(s) == 2]


def _rate(old: tuple[float, float] | None, new: tuple[float, float]) -> float | None:
    if old is None or new[0] <= old[0] or new[1] < old[1]:
        return None  # no time between, or the counter went back (a restart)
    return (new[1] - old[1]) / (new[0] - old[0])


def _usage(cores: float, memory: float) -> dict[str, str]:
    return {"cpu": f"{round(cores * 1e9)}n", "memory": f"{int(memory) // 1024}Ki"}


def _metrics(kind: str, meta: dict[str, str], at: float, since: float) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "kind": kind,
        "apiVersion": API_VERSION,
        "metadata": {**meta, "creationTimestamp": stamp},
        "timestamp": stamp,
        "window": f"{round(at - since)}s",
    }


def discovery(path: str) -> dict[str, Any] | None:
    """The group's discovery documents; None for other paths."""
    version = {"groupVersion": API_VERSION, "version": VERSION}
    if path == f"/apis/{GROUP}":
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": GROUP,
            "versions": [version],
            "preferredVersion": version,
        }
    if path == f"/apis/{API_VERSION}":
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": API_VERSION,
            "resources": [
                {
                    "name": "nodes",
                    "singularName": "",
                    "namespaced": False,
                    "kind": "NodeMetrics",
                    "verbs": ["get", "list"],
                },
                {
                    "name": "pods",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "PodMetrics",
                    "verbs": ["get", "list"],
                },
            ],
        }
    return None


def group_entry() -> dict[str, Any]:
    """Its entry in `/apis`'s APIGroupList."""
    version = {"groupVersion": API_VERSION, "version": VERSION}
    return {"name": GROUP, "versions": [version], "preferredVersion": version}
