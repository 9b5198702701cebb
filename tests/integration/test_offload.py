"""Offload mode end to end: unscheduled managed pods and Jobs bound to the virtual node
through the pods/binding subresource, each trigger and each reason not to, and a Job run
to completion across a failed attempt (the test plays the Job controller)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.core.reasons import Notice, PodReason
from reconciler.demo.sandbox import Sandbox
from reconciler.sim.kube.resources import PODS
from tests.integration.conftest import FAST

MANAGED = {"runpod.io/managed": "true"}
NODE = "virtual-runpod"


@pytest.fixture
def box() -> Iterator[Sandbox]:
    # Offload after 10 minutes unless a test says otherwise, so each trigger shows alone.
    with Sandbox(FAST.with_values(max_pending_time_before_offload=600)) as sandbox:
        yield sandbox


def pending_pod(
    box: Sandbox,
    name: str,
    *,
    unschedulable: bool = True,
    annotations: dict[str, str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    pod = box.add_pod(
        name,
        bound=False,
        restart_policy="Never",
        command=["python", "run.py"],
        annotations=annotations,
        **options,
    )
    if unschedulable:
        box.kube_sim.make_unschedulable("default", name)
    return pod


def made_pods(box: Sandbox, job: str, *, unschedulable: bool = True) -> list[str]:
    """The names of the pods the Job controller made for `job`; with `unschedulable`, the
    scheduler has found no room for those still Pending and unplaced."""
    names = []
    for pod in box.job_pods(job):
        name = pod["metadata"]["name"]
        names.append(name)
        placed = pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") != "Pending"
        if unschedulable and not placed and not _marked(pod):
            box.kube_sim.make_unschedulable("default", name)
    return names


def _marked(pod: dict[str, Any]) -> bool:
    return any(
        c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def node_of(box: Sandbox, name: str) -> str | None:
    pod = box.pod(name)
    return None if pod is None else pod["spec"].get("nodeName")


def offload_events(box: Sandbox, name: str) -> list[str]:
    return [e["message"] for e in box.events(name) if e["reason"] == Notice.OFFLOADED]


def binding_requests(box: Sandbox) -> list[str]:
    return [
        path
        for method, path, *_ in box.kube_sim.requests
        if method == "POST" and path.endswith("/binding")
    ]


# --- triggers --------------------------------------------------------------------------


def test_offload_annotation_binds_a_pod_the_scheduler_has_not_given_up_on(box: Sandbox) -> None:
    pending_pod(
        box, "forced", unschedulable=False, annotations={**MANAGED, "runpod.io/offload": "true"}
    )
    box.tick()
    assert node_of(box, "forced") == NODE
    assert offload_events(box, "forced") == [f'bound to {NODE}: runpod.io/offload is "true"']
    box.tick()  # from here on an ordinary pod of the virtual node
    assert box.instance_for(box.pod("forced") or {}) is not None


def test_offload_annotation_on_the_job_binds_its_pods(box: Sandbox) -> None:
    box.add_job("train", annotations={**MANAGED, "runpod.io/offload": "true"}, bound=False)
    [pod] = made_pods(box, "train", unschedulable=False)
    box.tick()
    assert node_of(box, pod) == NODE


def test_unschedulable_longer_than_the_limit_is_offloaded(box: Sandbox) -> None:
    pending_pod(box, "waits", annotations=MANAGED)
    box.advance(599)
    box.tick()
    assert node_of(box, "waits") is None
    box.advance(2)
    box.tick()
    assert node_of(box, "waits") == NODE
    assert offload_events(box, "waits") == [
        f"bound to {NODE}: unschedulable for 601 s (offload after 600 s)"
    ]


def test_default_limit_of_zero_offloads_as_soon_as_unschedulable(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0)
    pending_pod(box, "now", annotations=MANAGED)
    box.tick()
    assert node_of(box, "now") == NODE


def test_job_annotation_overrides_the_wait_limit(box: Sandbox) -> None:
    box.add_job(
        "urgent",
        annotations={"runpod.io/max-pending-time-before-offload": "0"},
        labels=MANAGED,  # managed through the Job's label, as the old controller
        bound=False,
    )
    [pod] = made_pods(box, "urgent")
    box.tick()
    assert node_of(box, pod) == NODE


def test_more_unschedulable_than_the_threshold_offloads_the_oldest_excess(box: Sandbox) -> None:
    box.configure(pending_threshold=2)
    for name in ("first", "second", "third", "fourth"):
        pending_pod(box, name, annotations=MANAGED)
        box.advance(1)
    box.tick()
    assert [node_of(box, n) for n in ("first", "second", "third", "fourth")] == [
        NODE,
        NODE,
        None,
        None,
    ]
    assert offload_events(box, "first") == [
        f"bound to {NODE}: 4 managed pods unschedulable, more than the threshold of 2"
    ]
    box.tick()  # two remain, which is not more than the threshold
    assert node_of(box, "third") is None


# --- reasons not to bind ------------------------------------------------------------------


def test_a_pod_local_nodes_may_still_run_is_left_to_the_scheduler(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0)
    pending_pod(box, "schedulable", unschedulable=False, annotations=MANAGED)
    box.tick()
    assert node_of(box, "schedulable") is None and binding_requests(box) == []


def test_unmanaged_pods_are_never_offloaded(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0, pending_threshold=1)
    pending_pod(box, "plain")
    pending_pod(box, "plain-2")
    box.add_job("unmanaged", bound=False)
    made_pods(box, "unmanaged")
    box.tick()
    assert binding_requests(box) == []


def test_a_pod_bound_elsewhere_being_deleted_or_gated_is_not_bound(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0)
    forced = {**MANAGED, "runpod.io/offload": "true"}
    pending_pod(box, "elsewhere", annotations=forced, extra_spec={"nodeName": "gpu-node-1"})
    pending_pod(
        box,
        "gated",
        annotations=forced,
        extra_spec={"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
    )
    pending_pod(box, "leaving", annotations=forced)
    box.kube_sim.store.patch(
        PODS,
        "default",
        "leaving",
        "application/merge-patch+json",
        {"metadata": {"finalizers": ["example.com/hold"]}},
        "",
    )
    box.kube_sim.delete_pod("default", "leaving")
    assert (box.pod("leaving") or {})["metadata"].get("deletionTimestamp")
    box.tick()
    assert binding_requests(box) == []
    assert node_of(box, "elsewhere") == "gpu-node-1"


@pytest.mark.parametrize(
    "spec",
    [
        {"nodeSelector": {"pool": "on-prem-a100"}},
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "type",
                                        "operator": "NotIn",
                                        "values": ["virtual-kubelet"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
        },
        {
            "tolerations": [
                {
                    "key": "virtual-kubelet.io/provider",
                    "operator": "Equal",
                    "value": "aws",
                    "effect": "NoSchedule",
                }
            ]
        },
    ],
    ids=["node-selector", "node-affinity", "toleration-for-another-provider"],
)
def test_placement_rules_that_exclude_the_virtual_node_are_respected_unless_forced(
    box: Sandbox, spec: dict[str, Any]
) -> None:
    box.configure(max_pending_time_before_offload=0, pending_threshold=1)
    pending_pod(box, "placed", annotations=MANAGED, extra_spec=spec)
    pending_pod(box, "placed-2", annotations=MANAGED, extra_spec=spec)
    box.tick()
    assert binding_requests(box) == []
    pending_pod(
        box, "forced", annotations={**MANAGED, "runpod.io/offload": "true"}, extra_spec=spec
    )
    box.tick()
    assert node_of(box, "forced") == NODE


def test_placement_rules_that_allow_the_virtual_node_are_offloaded(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0)
    pending_pod(
        box,
        "fits",
        annotations=MANAGED,
        extra_spec={
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
        },
    )
    box.tick()
    assert node_of(box, "fits") == NODE


def test_offload_false_opts_a_managed_pod_out_of_the_automatic_triggers(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0, pending_threshold=1)
    box.add_job(
        "local-only",
        annotations={**MANAGED, "runpod.io/offload": "false"},
        completions=2,
        parallelism=2,
        bound=False,
    )
    assert len(made_pods(box, "local-only")) == 2
    box.tick()
    assert binding_requests(box) == []


def test_automatic_triggers_keep_to_the_instance_cap(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0, max_instances=1)
    pending_pod(box, "older", annotations=MANAGED)
    box.advance(1)
    pending_pod(box, "newer", annotations=MANAGED)
    box.tick()
    assert (node_of(box, "older"), node_of(box, "newer")) == (NODE, None)
    box.tick()
    assert node_of(box, "newer") is None  # "older" holds the one instance now


def test_bad_annotation_gets_an_event_and_the_other_pods_go_on(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0)
    pending_pod(box, "typo", annotations={**MANAGED, "runpod.io/offload": "yes"})
    pending_pod(box, "fine", annotations=MANAGED)
    report = box.tick()
    assert node_of(box, "typo") is None and node_of(box, "fine") == NODE
    [event] = [e for e in box.events("typo") if e["reason"] == PodReason.INVALID_ANNOTATION]
    assert event["type"] == "Warning"
    assert 'runpod.io/offload: "yes"' in event["message"]
    assert not report.failed


def test_losing_the_race_to_the_scheduler_is_harmless(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0)
    pending_pod(box, "raced", annotations=MANAGED)
    box.kube_sim.inject_fault("POST", "*/pods/raced/binding", 409)
    report = box.tick()
    assert report.failed == {"Bind": 1} and offload_events(box, "raced") == []
    box.tick()  # the next tick simply tries again
    assert node_of(box, "raced") == NODE


# --- a Job across a failed attempt -----------------------------------------------------


def test_job_with_three_completions_two_in_parallel_and_one_failed_attempt(box: Sandbox) -> None:
    box.configure(max_pending_time_before_offload=0)
    box.add_job("train", annotations=MANAGED, completions=3, parallelism=2, bound=False)
    outcomes = iter([0, 1, 0, 0])  # the second attempt fails
    failed = None
    for _ in range(12):
        made_pods(box, "train")  # the Job controller's new pods find no GPU
        box.tick()
        box.advance(30)
        for pod in box.job_pods("train"):
            instance = box.instance_for(pod)
            if (
                instance is not None
                and instance["status"] == "RUNNING"
                and (pod.get("status") or {}).get("phase") == "Running"
            ):
                outcome = next(outcomes)
                failed = failed or (pod["metadata"]["name"] if outcome else None)
                box.runpod_sim.exit_process(instance["id"], outcome)
    assert next(outcomes, None) is None, "all four attempts ran"
    phases = {p["metadata"]["name"]: p["status"]["phase"] for p in box.job_pods("train")}
    assert failed is not None
    state = (box.pod(failed) or {})["status"]["containerStatuses"][0]["state"]
    assert state["terminated"]["exitCode"] == 1
    assert sorted(phases.values()) == ["Failed", "Succeeded", "Succeeded", "Succeeded"]
    assert len(phases) == 4 and all(offload_events(box, name) for name in phases), (
        "every attempt was offloaded"
    )
    assert [i for i in box.owned_instances() if i["status"] != "TERMINATED"] == []
