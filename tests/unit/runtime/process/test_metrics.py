"""Prometheus metrics read off a tick's report: owned cost per hour, orphans found and
terminated, duplicates healed, leaked seconds (a leak found again adds only its new
seconds), pending-to-running time (only for a pod that was not
Running before the patch, and only for actions carried out), RunPod requests by route,
and the GPU utilization of each pod's GPUs (gone with the pod)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.core.actions import PatchStatus, PodRef, SaveRow, Terminate
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.core.domain import Instance, InstanceStatus, Runtime
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.plan.situation import ownership_of
from reconciler.core.planner import Observation
from reconciler.core.pods.usage import gpu_utilization
from reconciler.core.reasons import TerminateReason
from reconciler.runtime.process.metrics import Metrics
from reconciler.runtime.tick.tick_report import TickReport

OWNER = "cluster/virtual-runpod"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def instance(id: str, cost: float, owner: str = OWNER) -> Instance:
    return Instance(
        id,
        id,
        InstanceStatus.RUNNING,
        cost_per_hr=cost,
        env={OWNER_ENV: owner, POD_UID_ENV: f"uid-{id}"},
    )


def pod(uid: str, phase: str, created: datetime) -> dict[str, Any]:
    return {
        "metadata": {
            "name": uid,
            "namespace": "default",
            "uid": uid,
            "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "status": {"phase": phase},
    }


def row(uid: str, **changes: Any) -> MappingRow:
    return MappingRow(uid, "default", uid, MappingState.RUNNING, NOW, NOW, **changes)


def running(uid: str) -> PatchStatus:
    return PatchStatus(PodRef("default", uid, uid), {"phase": "Running"}, row(uid))


def value(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    found = metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if found is None else found


def report(
    pods: list[dict[str, Any]],
    instances: list[Instance],
    done: list[Any],
    actions: list[Any] | None = None,
) -> TickReport:
    observation = Observation(pods, instances, [])
    return TickReport(
        started_at=NOW,
        finished_at=NOW,
        observed=True,
        observation=observation,
        done=done,
        actions=actions if actions is not None else done,
        # As the engine works them out at the end of its tick.
        gpus=gpu_utilization(pods, ownership_of(observation, OWNER).owned),
    )


def test_cost_is_the_sum_over_our_own_instances() -> None:
    metrics = Metrics()
    metrics.observe(
        report(
            [],
            [instance("a", 0.5), instance("b", 1.25), instance("theirs", 9.0, owner="other/node")],
            [],
        ),
        None,
        OWNER,
    )
    assert value(metrics, "reconciler_owned_cost_per_hour_usd") == 1.75


def test_healing_is_counted_by_the_reason_of_carried_out_terminations() -> None:
    metrics = Metrics()
    # The words are for people: the metric follows the typed reason, whatever they say.
    duplicate = Terminate("d", TerminateReason.DUPLICATE, "reworded: second instance")
    orphan = Terminate("o", TerminateReason.ORPHAN, "duplicate instance for one pod")
    first_sighting = SaveRow(row("gone", orphan_sightings=1))
    finished = Terminate("f", TerminateReason.POD_ENDED, "pod Succeeded")
    failed_duplicate = Terminate("d2", TerminateReason.DUPLICATE, "")
    metrics.observe(
        report(
            [],
            [],
            [duplicate, orphan, first_sighting, finished],
            actions=[duplicate, orphan, first_sighting, finished, failed_duplicate],
        ),
        None,
        OWNER,
    )
    assert value(metrics, "reconciler_duplicates_healed_total") == 1
    assert value(metrics, "reconciler_orphans_terminated_total") == 1
    assert value(metrics, "reconciler_orphans_found_total") == 1


def test_pending_to_running_is_timed_once_per_pod_from_its_creation() -> None:
    metrics = Metrics()
    pods = [
        pod("new", "Pending", NOW - timedelta(seconds=42)),
        pod("already", "Running", NOW - timedelta(seconds=900)),
    ]
    metrics.observe(report(pods, [], [running("new"), running("already")]), None, OWNER)
    assert value(metrics, "reconciler_pod_pending_to_running_seconds_count") == 1
    assert value(metrics, "reconciler_pod_pending_to_running_seconds_sum") == 42
    assert value(metrics, "reconciler_pod_pending_to_running_seconds_bucket", {"le": "30.0"}) == 0
    assert value(metrics, "reconciler_pod_pending_to_running_seconds_bucket", {"le": "60.0"}) == 1


def test_a_patch_that_failed_times_nothing() -> None:
    metrics = Metrics()
    pods = [pod("new", "Pending", NOW - timedelta(seconds=42))]
    metrics.observe(report(pods, [], [], actions=[running("new")]), None, OWNER)
    assert value(metrics, "reconciler_pod_pending_to_running_seconds_count") == 0


def test_runpod_requests_are_counted_by_route_template_never_by_id() -> None:
    metrics = Metrics()
    metrics.runpod_response("GET /v2/pods/{id}", 404)
    metrics.runpod_response("GET /v2/pods/{id}", 404)
    metrics.runpod_response("POST /v2/pods", 0)
    assert (
        value(
            metrics,
            "reconciler_runpod_requests_total",
            {"method": "GET", "route": "/v2/pods/{id}", "status": "404"},
        )
        == 2
    )
    assert (
        value(
            metrics,
            "reconciler_runpod_requests_total",
            {"method": "POST", "route": "/v2/pods", "status": "0"},
        )
        == 1
    )


def test_a_leak_found_again_adds_only_its_new_seconds() -> None:
    metrics = Metrics()
    first = Terminate("i", TerminateReason.LEAK, "leak", leaked_seconds=4000)
    again = Terminate("i", TerminateReason.LEAK, "leak", leaked_seconds=7600)
    other = Terminate("j", TerminateReason.LEAK, "leak", leaked_seconds=100)
    metrics.observe(report([], [], [first]), None, OWNER)
    metrics.observe(report([], [], [again, other]), None, OWNER)
    assert value(metrics, "reconciler_leaked_instance_seconds_total") == 7700


def test_gpu_utilization_of_each_pods_gpus() -> None:
    metrics = Metrics()
    gpu = replace(
        instance("g", 1.0),
        gpu_type_id="NVIDIA RTX A6000",
        gpu_count=2,
        runtime=Runtime(60, gpu_percents=(90, 35)),
    )
    cpu = replace(
        instance("c", 0.1), cpu_flavor_id="cpu3c", vcpu_count=4, runtime=Runtime(60, cpu_percent=50)
    )
    pods = [pod("uid-g", "Running", NOW), pod("uid-c", "Running", NOW)]
    metrics.observe(report(pods, [gpu, cpu], []), None, OWNER)
    name = "reconciler_pod_gpu_utilization_ratio"
    labels = {"namespace": "default", "pod": "uid-g"}
    assert value(metrics, name, {**labels, "gpu": "0"}) == 0.9
    assert value(metrics, name, {**labels, "gpu": "1"}) == 0.35
    samples = [s for m in metrics.registry.collect() if m.name == name for s in m.samples]
    assert len(samples) == 2  # a CPU pod has none
    metrics.observe(report([], [], []), None, OWNER)  # the pod is gone: so are its series
    assert [s for m in metrics.registry.collect() if m.name == name for s in m.samples] == []
