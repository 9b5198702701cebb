"""Prometheus metrics of the loop mode, fed from each tick's report."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reconciler.engine import TickReport


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.tick_seconds = Histogram(
            "reconciler_tick_duration_seconds", "Duration of one reconcile tick.",
            registry=self.registry, buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60))
        self.ticks = Counter("reconciler_ticks", "Ticks by result.", ["result"],
                             registry=self.registry)
        self.actions = Counter("reconciler_actions", "Actions by kind and outcome.",
                               ["kind", "outcome"], registry=self.registry)
        self.pods = Gauge("reconciler_managed_pods", "Pods bound to the virtual node.",
                          registry=self.registry)
        self.instances = Gauge("reconciler_owned_instances", "RunPod instances we own.",
                               registry=self.registry)
        self.rate_budget = Gauge("reconciler_runpod_rate_budget_remaining",
                                 "RunPod requests left in the current window.",
                                 registry=self.registry)

    def observe(self, report: TickReport, rate_budget: int | None) -> None:
        self.tick_seconds.observe(report.duration)
        self.ticks.labels("ok" if report.ok else "failed").inc()
        for kind, count in report.applied.items():
            self.actions.labels(kind, "applied").inc(count)
        for kind, count in report.failed.items():
            self.actions.labels(kind, "failed").inc(count)
        if report.ok:
            self.pods.set(report.pods)
            self.instances.set(report.instances)
        if rate_budget is not None:
            self.rate_budget.set(rate_budget)
