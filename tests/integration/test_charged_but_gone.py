"""Charges told without the database (docs/architecture.md §3, Money): an id RunPod
bills that it neither lists nor answers for is told (log, metric, `reconciler cost`)
whoever's it was, by an hourly audit of RunPod's own billing that needs no journal: a
cluster, or an instance, whose DELETE was answered yet bills on is told although the
database was lost right after the DELETE, and so is a network volume's, in CronJob
mode (a new process each run). A resource that simply ended is never even read by id.
Through both simulators."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import kubernetes
import pytest

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.process.metrics import Metrics

from .test_claims import add_claim, add_class, delete_claim, provision
from .test_cluster_lag import delete_database
from .test_clusters import members, running_gang
from .test_money import _running
from .test_resource_cost import _cost


def _runs(box: Sandbox, hours: int) -> list[Any]:
    """CronJob runs every 20 minutes: a new process each, the database kept."""
    reports = []
    for _ in range(hours * 3):
        box.advance(20 * 60)
        box.restart()
        reports.append(box.tick())
    return reports


def _gets_by_id(box: Sandbox, prefix: str) -> list[str]:
    return [
        r.path
        for r in box.runpod_sim.requests
        if r.method == "GET" and r.path.startswith(prefix) and r.path.count("/") >= 3
    ]


def test_a_cluster_billed_after_its_delete_is_told_with_the_database_lost(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    box.tick()
    box.runpod_sim.faults.cluster_delete_keeps_billing()  # answered 204, yet it bills on
    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    box.tick()
    assert box.runpod_sim.clusters == {}
    delete_database(box)  # the journal of the DELETE with it
    seen = len(box.runpod_sim.requests)
    with caplog.at_level(logging.ERROR):
        reports = _runs(box, 4)
    told = [[g.resource_id for g in r.ghost_charges or ()] for r in reports]
    assert told[-1] == [cluster_id]
    first = told.index([cluster_id])
    assert all(t == [cluster_id] for t in told[first:])  # on every run from then on
    assert any(
        "CHARGED BUT GONE" in r.getMessage() and cluster_id in r.getMessage()
        for r in caplog.records
    )
    metrics = Metrics()
    metrics.observe(reports[-1], None, box.settings.owner_id)
    assert metrics.registry.get_sample_value("reconciler_charged_gone_resources") == 1
    assert (metrics.registry.get_sample_value("reconciler_charged_gone_usd") or 0) > 0
    [shown] = _cost(box)["charged_but_gone"]
    assert (shown["kind"], shown["id"]) == ("cluster", cluster_id)
    assert shown["usd_last_hour"] > 0
    # The audit reads each route's last whole hour once, never on the ticks between.
    hourly = [
        (r.path, r.query["startTime"])
        for r in box.runpod_sim.requests[seen:]
        if r.path.startswith("/v2/billing/")
        and datetime.fromisoformat(r.query["endTime"])
        - datetime.fromisoformat(r.query["startTime"])
        == timedelta(hours=1)
    ]
    assert len(hourly) == len(set(hourly)) == 3 * 5  # 5 clock hours, 3 routes


def test_an_instance_billed_after_its_delete_is_told_with_the_database_lost(box: Sandbox) -> None:
    instance = _running(box, "web")
    box.runpod_sim.faults.delete_keeps_billing()
    box.kube_sim.delete_pod("default", "web", grace_seconds=30)
    box.tick()  # the DELETE answers 204, yet it bills on
    box.tick()
    assert box.pod("web") is None
    delete_database(box)
    reports = _runs(box, 4)
    assert [g.resource_id for g in reports[-1].ghost_charges or ()] == [instance["id"]]
    [shown] = _cost(box)["charged_but_gone"]
    assert (shown["kind"], shown["id"]) == ("pod", instance["id"])


def test_a_resource_that_simply_ended_is_neither_told_nor_read_by_id(box: Sandbox) -> None:
    _running(box, "web")
    box.kube_sim.delete_pod("default", "web", grace_seconds=30)
    box.tick()
    box.tick()
    assert box.pod("web") is None
    before = len(_gets_by_id(box, "/v2/pods/"))
    reports = _runs(box, 4)
    assert all(not r.ghost_charges for r in reports)
    assert len(_gets_by_id(box, "/v2/pods/")) == before
    assert _cost(box)["charged_but_gone"] == []


def test_a_volume_billed_after_its_delete_is_told_with_the_database_lost(box: Sandbox) -> None:
    add_class(box)
    add_claim(box)
    provision(box)
    [volume_id] = box.runpod_sim.volumes
    box.runpod_sim.faults.volume_delete_keeps_billing()
    delete_claim(box)
    box.tick()  # the released volume's DELETE answers 204, yet it bills on; its PV goes
    assert box.runpod_sim.volumes == {}
    delete_database(box)
    reports = _runs(box, 4)
    assert [(g.kind, g.resource_id) for g in reports[-1].ghost_charges or ()] == [
        ("network-volume", volume_id)
    ]
    [shown] = _cost(box)["charged_but_gone"]
    assert (shown["kind"], shown["id"], shown["named_by"]) == ("network-volume", volume_id, None)


def test_an_audit_that_fails_waits_for_the_next_hour(box: Sandbox) -> None:
    """RunPod refuses one of the audit's routes: the audit is given up for this hour,
    not tried again (and its requests spent again) on every quiet tick after."""
    box.add_pod("p", command=["python", "serve.py"])
    box.tick()
    box.advance(30)
    box.tick()
    now = box.clock.now()
    box.advance(3600 - now.minute * 60 - now.second + 60)  # a new hour: the audit is due
    box.runpod_sim.faults.inject("GET", "/v2/billing/clusters", 500, count=10_000)
    box.tick()
    before = len(box.runpod_sim.requests)
    for _ in range(5):
        box.advance(30)
        box.tick()
    assert not [r.path for r in box.runpod_sim.requests[before:] if "/billing/" in r.path]
    box.advance(3600)  # the next hour tries again
    box.tick()
    assert [r.path for r in box.runpod_sim.requests[before:] if r.path == "/v2/billing/clusters"]
