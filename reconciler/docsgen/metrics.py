"""Every metric a running reconciler exports on `/metrics`, with its type and labels."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from reconciler.docsgen.markdown import code, table
from reconciler.runtime.process.metrics import GpuGauge, Metrics

# prometheus_client adds these to the name a counter is declared with.
_SUFFIX = {"counter": "_total"}


def exported() -> list[tuple[str, str, tuple[str, ...], str]]:
    """Name, type, labels and meaning of each metric of a fresh `Metrics`, in the order
    they are declared: the declared metrics, and the collectors made at scrape time."""
    found = []
    for value in vars(Metrics()).values():
        # What prometheus_client keeps of a declaration is private to it, but stable.
        if isinstance(value, MetricWrapperBase):
            kind = str(value._type)
            labels = tuple(value._labelnames)
            found.append((value._name + _SUFFIX.get(kind, ""), kind, labels, value._documentation))
        elif isinstance(value, GpuGauge):  # a collector: its families made at scrape time
            for family in value.describe():
                labels = tuple(family._labelnames)
                found.append((family.name, family.type, labels, family.documentation))
    return found


def page(_root: Path) -> str:
    rows = [
        (code(name), kind, ", ".join(code(label) for label in labels), meaning)
        for name, kind, labels, meaning in exported()
    ]
    return "\n".join(
        [
            "# Metrics\n",
            "Served by `reconciler sync` (the loop) on `/metrics` at `--health-address` "
            "(default `:8080`), for Prometheus. A `--once` run serves none. "
            "[Monitoring](../guides/monitoring.md) shows the alerts and the dashboard "
            "built on them.\n",
            table(("metric", "type", "labels", "meaning"), rows),
        ]
    )
