"""The kubelet's resource metrics: `/metrics/resource` (Prometheus text, what
metrics-server scrapes for `kubectl top`) and `/stats/summary` (JSON), from the usage
meter the tick keeps (`core/pods/usage.py`).

metrics-server reads `node_cpu_usage_seconds_total`, `node_memory_working_set_bytes`,
`container_cpu_usage_seconds_total`, `container_memory_working_set_bytes` and
`container_start_time_seconds`, each sample with a timestamp, and drops a node or a pod
whose CPU or memory is 0. Only CPU instances are in them (see core/pods/usage.py for why).

metrics-server's CPU figure is the counter's rise between two scrapes over the interval of
their timestamps (whole milliseconds), so the figures are taken at the stamped instant
(`sample_time`) and printed in full, as the kubelet's Prometheus encoder prints a float
(the shortest text that reads back as the same number): otherwise the rate is off by the
stamp's truncation and the counter's rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from reconciler.core.pods.usage import ContainerUsage

_SERIES = (
    (
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
    ),
    (
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set of the container in bytes",
    ),
    (
        "container_start_time_seconds",
        "gauge",
        "Start time of the container since unix epoch in seconds",
    ),
)


def sample_time(now: datetime) -> datetime:
    """`now` to the whole millisecond a sample is stamped with."""
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def resource_metrics(usage: Sequence[ContainerUsage], now: datetime) -> str:
    """The page at `now`, which is a `sample_time`."""
    stamp = round(now.timestamp() * 1000)
    lines = [
        "# HELP node_cpu_usage_seconds_total Cumulative cpu time consumed by the node "
        "in core-seconds",
        "# TYPE node_cpu_usage_seconds_total counter",
        f"node_cpu_usage_seconds_total {_float(sum(u.cpu_seconds for u in usage))} {stamp}",
        "# HELP node_memory_working_set_bytes Current working set of the node in bytes",
        "# TYPE node_memory_working_set_bytes gauge",
        f"node_memory_working_set_bytes {sum(u.memory_bytes for u in usage)} {stamp}",
    ]
    values = {
        "container_cpu_usage_seconds_total": lambda u: _float(u.cpu_seconds),
        "container_memory_working_set_bytes": lambda u: str(u.memory_bytes),
        "container_start_time_seconds": lambda u: _float(u.started_at.timestamp()),
    }
    for name, kind, help_text in _SERIES:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for u in usage:
            labels = (
                f'container="{_escape(u.container)}",namespace="{_escape(u.namespace)}",'
                f'pod="{_escape(u.pod)}"'
            )
            lines.append(f"{name}{{{labels}}} {values[name](u)} {stamp}")
    lines += [
        "# HELP scrape_error 1 if there was an error while getting container metrics, 0 otherwise",
        "# TYPE scrape_error gauge",
        "scrape_error 0",
    ]
    return "\n".join(lines) + "\n"


def stats_summary(node: str, usage: Sequence[ContainerUsage], now: datetime) -> dict[str, Any]:
    pods: dict[tuple[str, str], dict[str, Any]] = {}
    for u in usage:
        entry = pods.setdefault(
            (u.namespace, u.pod),
            {
                "podRef": {"name": u.pod, "namespace": u.namespace, "uid": u.pod_uid},
                "startTime": _time(u.started_at),
                "containers": [],
            },
        )
        entry["containers"].append(
            {
                "name": u.container,
                "startTime": _time(u.started_at),
                **_stats(u.cpu_seconds, u.memory_bytes, now),
            }
        )
    for entry in pods.values():
        cpu = sum(c["cpu"]["usageCoreNanoSeconds"] for c in entry["containers"]) / 1e9
        memory = sum(c["memory"]["workingSetBytes"] for c in entry["containers"])
        entry.update(_stats(cpu, memory, now))
    total = _stats(sum(u.cpu_seconds for u in usage), sum(u.memory_bytes for u in usage), now)
    return {"node": {"nodeName": node, **total}, "pods": list(pods.values())}


def _stats(cpu_seconds: float, memory_bytes: int, now: datetime) -> dict[str, Any]:
    # No rate here: the summary's readers (metrics-server's old path) take it from two reads.
    return {
        "cpu": {"time": _time(now), "usageCoreNanoSeconds": int(cpu_seconds * 1e9)},
        "memory": {"time": _time(now), "workingSetBytes": memory_bytes},
    }


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _float(value: float) -> str:
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
