"""Pods without a GPU end to end, through both simulators over real HTTP: a pod asking
for 3 CPUs and 6 GiB becomes a 4-vCPU instance of the cheapest fitting flavor and runs;
a request no flavor meets fails with the reason naming the largest offer; the
--pods-without-gpu flag's three values (and the flag as the CLI reads it); and what it
costs in RunPod requests (the CPU catalog read once per TTL, nothing in a steady tick)."""

from __future__ import annotations

from typing import Any

import click
import pytest

from reconciler.cli.options import settings_from
from reconciler.cli.sync_command import sync
from reconciler.core.config import PodsWithoutGpu
from reconciler.core.reasons import Notice, PodReason
from reconciler.demo.sandbox import Sandbox

from .conftest import FAST


def add_cpu_pod(box: Sandbox, name: str, cpu: str, memory: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "python:3.11",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    return box.add_pod(name, extra_spec={"containers": [container]})


def status(box: Sandbox, name: str) -> dict[str, Any]:
    return (box.pod(name) or {}).get("status") or {}


def catalog_reads(box: Sandbox, path: str) -> int:
    return sum(1 for r in box.runpod_sim.requests if r.path == path)


def test_a_cpu_pod_gets_the_cheapest_fitting_flavor_and_runs(box: Sandbox) -> None:
    add_cpu_pod(box, "prep", "3", "6Gi")
    box.tick()
    instance = box.instance_for(box.pod("prep") or {})
    assert instance is not None
    assert instance["cpu"] == {"id": "cpu3c", "vcpuCount": 4, "memory": 8}
    assert "gpu" not in instance and instance["cost"] == 0.12
    created = [e for e in box.events("prep") if e["reason"] == Notice.CREATED_INSTANCE]
    assert "cpu3c with 4 vCPUs" in created[0]["message"]
    box.advance(30)
    box.tick()
    assert status(box, "prep")["phase"] == "Running"
    assert catalog_reads(box, "/v2/catalog/cpus") == 1
    assert catalog_reads(box, "/v2/catalog/gpus") == 0  # no GPU pod waited


def test_catalogs_cost_nothing_in_a_steady_tick(box: Sandbox) -> None:
    add_cpu_pod(box, "prep", "2", "1Gi")
    box.tick()
    box.advance(30)
    box.tick()
    before = len(box.runpod_sim.requests)
    box.tick()
    assert [r.path for r in box.runpod_sim.requests[before:]] == ["/v2/pods"]
    add_cpu_pod(box, "prep-2", "2", "1Gi")  # within the TTL: the cached catalog serves
    box.tick()
    assert catalog_reads(box, "/v2/catalog/cpus") == 1


def test_an_impossible_cpu_request_fails_naming_the_largest_offer(box: Sandbox) -> None:
    add_cpu_pod(box, "huge", "100", "8Gi")
    box.tick()
    pod_status = status(box, "huge")
    assert pod_status["phase"] == "Failed"
    assert pod_status["reason"] == PodReason.UNSATISFIABLE_CPU_REQUEST
    assert "the largest offer is cpu3g with 64 vCPUs and 256 GB" in pod_status["message"]
    assert box.runpod_sim.instances == {}


def test_flag_gpu_gives_pods_without_gpu_one_gpu() -> None:
    with Sandbox(FAST.with_values(pods_without_gpu=PodsWithoutGpu.GPU)) as box:
        add_cpu_pod(box, "prep", "3", "6Gi")
        box.tick()
        instance = box.instance_for(box.pod("prep") or {})
        assert instance is not None and instance["gpu"]["count"] == 1 and "cpu" not in instance


def test_flag_refuse_fails_pods_without_gpu() -> None:
    with Sandbox(FAST.with_values(pods_without_gpu=PodsWithoutGpu.REFUSE)) as box:
        add_cpu_pod(box, "prep", "3", "6Gi")
        box.add_pod("trainer")  # asks for a GPU: unaffected
        box.tick()
        assert status(box, "prep")["reason"] == PodReason.GPU_REQUIRED
        assert status(box, "prep")["phase"] == "Failed"
        assert box.instance_for(box.pod("trainer") or {}) is not None


@pytest.mark.parametrize("value", ["cpu", "gpu", "refuse"])
def test_the_flag_takes_its_three_values(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", "k")
    with sync.make_context("sync", ["--pods-without-gpu", value]) as context:
        assert settings_from(dict(context.params)).placement.pods_without_gpu == PodsWithoutGpu(
            value
        )
    monkeypatch.setenv("RECONCILER_PODS_WITHOUT_GPU", value)
    with sync.make_context("sync", []) as context:
        assert settings_from(dict(context.params)).placement.pods_without_gpu == PodsWithoutGpu(
            value
        )


def test_the_flag_refuses_other_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", "k")
    with pytest.raises(click.BadParameter, match="'cpu', 'gpu', 'refuse'"):
        sync.make_context("sync", ["--pods-without-gpu", "tpu"])


def test_a_cpu_pod_counts_against_the_spend_cap() -> None:
    with Sandbox(FAST.with_values(max_hourly_spend=0.1)) as box:
        add_cpu_pod(box, "prep", "3", "6Gi")  # 4 vCPUs of cpu3c: 0.12 USD/h
        box.tick()
        assert status(box, "prep")["containerStatuses"][0]["state"]["waiting"]["reason"] == (
            PodReason.BUDGET_EXCEEDED
        )
        assert box.runpod_sim.instances == {}
