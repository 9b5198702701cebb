"""Instant Clusters in the leak audit and the metrics, through both simulators: a cluster
of ours that no Job's gang runs and that nothing collects (no gang tag) is reported after
the orphan grace (an error log, `reconciler_leaked_clusters`) and left alone; a cluster
the gangs' planning collects in time is not a leak; a cluster RunPod bills for hours
after answering its DELETE is deleted again (the billing audit), one deleted for good is
not; clusters and members of ours are gauges, creations and deletions counters."""

from __future__ import annotations

import logging
from typing import Any

import kubernetes
import pytest
import requests

from reconciler.core.contract import OWNER_ENV
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.runtime.process.metrics import Metrics
from reconciler.runtime.tick.resources.sections import ClusterSection
from reconciler.runtime.tick.tick_report import TickReport

from .test_clusters import members, running_gang


def _cluster_of_ours_without_a_gang(box: Sandbox) -> str:
    """Made with our owner tag and no gang tag (an older version, a hand-made copy)."""
    body: dict[str, Any] = {
        "name": "lost",
        "type": "TRAINING",
        "compute": {"gpuTypeId": "NVIDIA RTX A6000", "gpuCountPerPod": 1, "podCount": 2},
        "image": "python:3.11",
        "env": {OWNER_ENV: box.settings.owner_id},
    }
    with requests.Session() as api:
        api.headers["Authorization"] = f"Bearer {API_KEY}"
        made = api.post(f"{box.runpod_sim.base_url}/v2/clusters", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _observe(metrics: Metrics, box: Sandbox, report: TickReport) -> None:
    metrics.observe(report, None, box.settings.owner_id)


def _value(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    return metrics.registry.get_sample_value(name, labels or {}) or 0.0


def test_a_cluster_of_ours_that_no_gang_runs_is_a_leak_after_the_grace(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    cluster_id = _cluster_of_ours_without_a_gang(box)
    metrics = Metrics()
    first = box.tick()
    _observe(metrics, box, first)
    assert ClusterSection.of(first).leaks == []  # just seen: the grace runs from now
    assert _value(metrics, "reconciler_leaked_clusters") == 0
    assert _value(metrics, "reconciler_owned_clusters") == 1
    assert _value(metrics, "reconciler_owned_cluster_members") == 2
    box.advance(box.settings.timing.orphan_grace_time + 1)
    with caplog.at_level(logging.ERROR):
        report = box.tick()
    _observe(metrics, box, report)
    assert [c.cluster_id for c in ClusterSection.of(report).leaks] == [cluster_id]
    assert _value(metrics, "reconciler_leaked_clusters") == 1
    assert any(cluster_id in r.getMessage() and "LEAK" in r.getMessage() for r in caplog.records)
    # Kept: nothing of ours can tell its Job, so nothing of it is deleted.
    assert cluster_id in box.runpod_sim.clusters
    assert not [r for r in box.runpod_sim.requests if r.method == "DELETE"]


def test_a_cluster_collected_in_time_is_no_leak_and_the_counters_count(box: Sandbox) -> None:
    metrics = Metrics()
    box.add_indexed_job("train", 2)
    _observe(metrics, box, box.tick())
    box.advance(30)
    _observe(metrics, box, box.tick())
    assert _value(metrics, "reconciler_clusters_created_total") == 1
    assert _value(metrics, "reconciler_owned_clusters") == 1
    assert _value(metrics, "reconciler_owned_cluster_members") == 2
    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    for _ in range(3):
        report = box.tick()
        _observe(metrics, box, report)
        assert ClusterSection.of(report).leaks == []
        box.advance(box.settings.timing.orphan_grace_time + 1)
    assert members(box) == []
    assert _value(metrics, "reconciler_clusters_deleted_total", {"reason": "pod-failed"}) == 1
    assert _value(metrics, "reconciler_owned_clusters") == 0
    assert _value(metrics, "reconciler_leaked_clusters") == 0


def test_a_running_gang_is_no_leak(box: Sandbox) -> None:
    running_gang(box)
    box.advance(box.settings.timing.orphan_grace_time + 1)
    box.tick()
    box.advance(box.settings.timing.orphan_grace_time + 1)
    assert ClusterSection.of(box.tick()).leaks == []


def test_a_cluster_billed_after_its_delete_was_answered_is_deleted_again(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    box.tick()  # whose the cluster is, written
    box.runpod_sim.faults.cluster_delete_keeps_billing()  # answered 204, yet it bills on
    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    box.tick()
    box.tick()
    assert box.runpod_sim.clusters == {}
    deletes = [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]
    assert deletes == [f"/v2/clusters/{cluster_id}"]
    metrics = Metrics()
    box.advance(3 * 3600)
    with caplog.at_level(logging.ERROR):
        report = box.tick()  # the hourly read finds charges after the DELETE
    _observe(metrics, box, report)
    deletes = [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]
    assert deletes == [f"/v2/clusters/{cluster_id}"] * 2
    assert _value(metrics, "reconciler_clusters_deleted_total", {"reason": "leak"}) == 1
    assert any("LEAK" in r.getMessage() and cluster_id in r.getMessage() for r in caplog.records)
    box.advance(3 * 3600)
    box.tick()  # deleted for good: billed no more, not deleted a third time
    deletes = [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]
    assert len(deletes) == 2


def test_a_cluster_deleted_for_good_is_no_leak(box: Sandbox) -> None:
    running_gang(box)
    box.tick()
    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    box.tick()
    box.advance(3 * 3600)
    box.tick()
    box.advance(3 * 3600)
    box.tick()
    assert len([r for r in box.runpod_sim.requests if r.method == "DELETE"]) == 1


def test_a_leaked_cluster_is_reported_by_runs_that_each_tick_once(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    """CronJob mode: every run is a new process, so a sighting kept in memory is never
    old enough; the grace runs from RunPod's own record of when it made the cluster."""
    cluster_id = _cluster_of_ours_without_a_gang(box)
    box.restart()
    assert ClusterSection.of(box.tick()).leaks == []
    box.advance(box.settings.timing.orphan_grace_time + 1)
    box.restart()
    with caplog.at_level(logging.ERROR):
        report = box.tick()
    assert [c.cluster_id for c in ClusterSection.of(report).leaks] == [cluster_id]
    assert any(cluster_id in r.getMessage() and "LEAK" in r.getMessage() for r in caplog.records)
