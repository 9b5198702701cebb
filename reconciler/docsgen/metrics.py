"""Every metric a running reconciler exports on `/metrics`, with its type and labels."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from reconciler.docsgen.markdown import code, table
from reconciler.runtime.metrics import Metrics

# prometheus_client adds these to the name a counter is declared with.
_SUFFIX = {"counter": "_total"}


def exported() -> list[MetricWrapperBase]:
    """The metrics of a fresh `Metrics`, in the order they are declared."""
    return [value for value in vars(Metrics()).values() if isinstance(value, MetricWrapperBase)]


# What prometheus_client keeps of a metric's declaration is private to it, but stable.
def name(metric: MetricWrapperBase) -> str:
    return metric._name + _SUFFIX.get(str(metric._type), "")


def page(_root: Path) -> str:
    rows = [
        (
            code(name(metric)),
            str(metric._type),
            ", ".join(code(label) for label in metric._labelnames),
            metric._documentation,
        )
        for metric in exported()
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
