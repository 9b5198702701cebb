"""The kubelet's `/metrics/resource` page: its figures in full, as the kubelet's
Prometheus encoder prints a float."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.core.pods.usage import ContainerUsage
from reconciler.runtime.kubelet.resource_metrics import resource_metrics, sample_time


def test_figures_read_back_as_the_same_numbers() -> None:
    # A counter of a long-running pod, and a start time between seconds: nine
    # significant digits would round both (the start time to ten seconds).
    usage = ContainerUsage(
        namespace="default",
        pod="prep",
        pod_uid="uid",
        container="main",
        started_at=datetime(2026, 11, 28, 22, 0, 1, 250000, tzinfo=UTC),
        cpu_seconds=1234567.891234,
        memory_bytes=2_000_000_000,
    )
    now = datetime(2026, 11, 28, 23, 0, 0, 125000, tzinfo=UTC)
    page = resource_metrics([usage], now)
    samples = {
        line.split("{")[0].split(" ")[0]: line.split(" ")[-2:]
        for line in page.splitlines()
        if not line.startswith("#") and not line.startswith("scrape_error")
    }
    assert float(samples["container_cpu_usage_seconds_total"][0]) == 1234567.891234
    assert float(samples["node_cpu_usage_seconds_total"][0]) == 1234567.891234
    assert float(samples["container_start_time_seconds"][0]) == usage.started_at.timestamp()
    assert samples["container_memory_working_set_bytes"] == ["2000000000", "1795906800125"]


def test_a_sample_is_taken_at_its_whole_millisecond() -> None:
    assert sample_time(datetime(2026, 11, 28, 23, 0, 0, 125999, tzinfo=UTC)) == datetime(
        2026, 11, 28, 23, 0, 0, 125000, tzinfo=UTC
    )
