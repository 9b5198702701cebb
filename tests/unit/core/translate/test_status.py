"""Instance to pod status: the phase and container state for every instance status
(UNKNOWN included), planner reasons that fail or hold a pod, readiness by published TCP
ports, determinism (same inputs, same fingerprint; a patched status is a fixed point and
keeps its times), the metadata annotations, and the mirror key (equal keys, equal
status and annotations)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.domain import Instance, InstanceStatus, KubeObject, PortMapping, Runtime
from reconciler.core.reasons import PodReason
from reconciler.core.translate.status import (
    metadata_annotations,
    mirror_key,
    pod_status,
    status_fingerprint,
)

from ...conftest import build_pod

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
STAMP0, STAMP1 = "2026-05-01T12:00:00Z", "2026-05-01T12:05:00Z"

PUBLISHED = Runtime(
    uptime_seconds=30,
    ports=(
        PortMapping(8888, "http"),
        PortMapping(22, "tcp", public_ip="203.0.113.7", public_port=40022),
    ),
)


def _instance(status: InstanceStatus, runtime: Runtime | None = None, **fields: Any) -> Instance:
    return Instance(
        id="abc123",
        name="ml-train-0f1e2d3c",
        status=status,
        ports=("8888/http", "22/tcp"),
        runtime=runtime,
        **fields,
    )


def _status(
    pod: KubeObject, instance: Instance | None, exit_code: int | None = None, **kw: Any
) -> dict[str, Any]:
    return pod_status(pod, instance, exit_code=exit_code, now=kw.pop("now", T0), **kw)


def _conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def _container(status: dict[str, Any]) -> dict[str, Any]:
    (container,) = status["containerStatuses"]
    return container


@pytest.mark.parametrize(
    "instance",
    [
        _instance(InstanceStatus.PROVISIONING),
        _instance(InstanceStatus.STARTING),
        _instance(InstanceStatus.RUNNING),
        _instance(InstanceStatus.RUNNING, Runtime(ports=(PortMapping(8888, "http"),))),
    ],
    ids=["provisioning", "starting", "running-without-runtime", "running-tcp-unpublished"],
)
def test_not_yet_serving_is_pending_container_creating(instance: Instance) -> None:
    status = _status(build_pod(), instance)
    assert status["phase"] == "Pending"
    assert _container(status)["state"]["waiting"]["reason"] == "ContainerCreating"
    assert _container(status)["containerID"] == "runpod://abc123"
    assert _conditions(status) == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "False",
        "Ready": "False",
    }


def test_running_with_every_tcp_port_published_is_ready() -> None:
    started = T0 - timedelta(seconds=PUBLISHED.uptime_seconds)  # as long up as running
    status = _status(build_pod(), _instance(InstanceStatus.RUNNING, PUBLISHED, started_at=started))
    assert status["phase"] == "Running"
    assert _conditions(status)["Ready"] == "True"
    assert _container(status)["ready"] is True
    assert _container(status)["state"] == {"running": {"startedAt": "2026-05-01T11:59:30Z"}}
    assert status["hostIP"] == "203.0.113.7"
    # No pod IP: the EndpointSlice controller would publish it with the container's port.
    assert "podIP" not in status and "podIPs" not in status
    assert status["startTime"] == STAMP0


def test_http_only_instance_is_ready_without_published_ports() -> None:
    instance = Instance("abc", "n", InstanceStatus.RUNNING, ports=("8888/http",), runtime=Runtime())
    status = _status(build_pod(), instance)
    assert status["phase"] == "Running"
    assert "podIP" not in status


def test_a_running_pod_does_not_go_back_to_pending() -> None:
    pod = build_pod(status=_status(build_pod(), _instance(InstanceStatus.RUNNING, PUBLISHED)))
    status = _status(pod, _instance(InstanceStatus.RUNNING), now=T1)
    assert status["phase"] == "Running"
    assert _conditions(status)["Ready"] == "False"


def test_error_fails_the_pod() -> None:
    status = _status(build_pod(), _instance(InstanceStatus.ERROR))
    assert status["phase"] == "Failed"
    assert status["reason"] == PodReason.INSTANCE_ERROR
    assert "abc123" in status["message"]


@pytest.mark.parametrize(
    ("instance_status", "exit_code", "phase", "terminated"),
    [
        (InstanceStatus.EXITED, 0, "Succeeded", {"exitCode": 0, "reason": "Completed"}),
        (InstanceStatus.EXITED, 3, "Failed", {"exitCode": 3, "reason": "Error"}),
        (InstanceStatus.EXITED, None, "Failed", {"exitCode": 137, "reason": "ExitCodeUnknown"}),
        (InstanceStatus.TERMINATED, None, "Failed", {"exitCode": 137, "reason": "InstanceLost"}),
        (InstanceStatus.TERMINATED, 0, "Succeeded", {"exitCode": 0, "reason": "Completed"}),
    ],
)
def test_ended_instances(
    instance_status: InstanceStatus, exit_code: int | None, phase: str, terminated: dict[str, Any]
) -> None:
    status = _status(build_pod(), _instance(instance_status), exit_code)
    assert status["phase"] == phase
    state = _container(status)["state"]["terminated"]
    assert {k: state[k] for k in terminated} == terminated
    assert state["finishedAt"] == STAMP0
    assert _conditions(status)["Ready"] == "False"
    assert ("reason" in status) is (exit_code is None)


def test_a_reported_exit_code_ends_the_pod_before_the_instance_stops() -> None:
    status = _status(build_pod(), _instance(InstanceStatus.RUNNING, PUBLISHED), 2)
    assert status["phase"] == "Failed"
    assert _container(status)["state"]["terminated"]["exitCode"] == 2


def test_unknown_status_keeps_the_pod_as_it_is() -> None:
    running = _status(build_pod(), _instance(InstanceStatus.RUNNING, PUBLISHED))
    pod = build_pod(status=running)
    assert _status(pod, _instance(InstanceStatus.UNKNOWN), now=T1) == running
    assert _status(build_pod(status={}), _instance(InstanceStatus.UNKNOWN)) == {"phase": "Pending"}


def test_terminal_phase_is_final() -> None:
    succeeded = _status(build_pod(), _instance(InstanceStatus.EXITED), 0)
    pod = build_pod(status=succeeded)
    assert _status(pod, None, reason=PodReason.INSTANCE_LOST, now=T1) == succeeded


@pytest.mark.parametrize(
    "reason",
    [
        PodReason.INSTANCE_LOST,
        PodReason.CAPACITY_UNAVAILABLE,
        PodReason.UNSATISFIABLE_GPU_REQUEST,
        PodReason.DEADLINE_EXCEEDED,
    ],
)
def test_a_reason_fails_the_pod_and_shows_in_kubectl(reason: PodReason) -> None:
    status = _status(build_pod(), None, reason=reason, message="because")
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", reason, "because")
    assert _container(status)["state"]["terminated"]["reason"] == reason
    assert "containerID" not in _container(status)


@pytest.mark.parametrize(
    "reason",
    [
        PodReason.INVALID_ANNOTATION,
        PodReason.CREATE_CONTAINER_CONFIG_ERROR,
        PodReason.CAPACITY_UNAVAILABLE,
    ],
)
def test_a_pending_reason_holds_the_pod(reason: PodReason) -> None:
    status = _status(build_pod(), None, reason=reason, message='secret "x" not found', pending=True)
    assert status["phase"] == "Pending"
    assert _container(status)["state"] == {
        "waiting": {"reason": reason, "message": 'secret "x" not found'}
    }
    assert "reason" not in status


def test_no_instance_yet_is_container_creating() -> None:
    status = _status(build_pod(), None)
    assert (status["phase"], _container(status)["state"]["waiting"]["reason"]) == (
        "Pending",
        "ContainerCreating",
    )


def test_untranslatable_pod_still_gets_a_container_status() -> None:
    pod = build_pod(annotations={"kubectl.kubernetes.io/default-container": "ghost"})
    status = _status(pod, None, reason=PodReason.INVALID_ANNOTATION, pending=True)
    assert _container(status)["name"] == "main"


# --- determinism ---------------------------------------------------------------------


def test_same_inputs_same_fingerprint() -> None:
    """Equal inputs built apart give one fingerprint; a changed status another."""
    running = _status(build_pod(), _instance(InstanceStatus.RUNNING, PUBLISHED))
    again = _status(build_pod(), _instance(InstanceStatus.RUNNING, PUBLISHED))
    assert running is not again and status_fingerprint(running) == status_fingerprint(again)
    starting = _status(build_pod(), _instance(InstanceStatus.STARTING))
    assert status_fingerprint(starting) != status_fingerprint(running)
    assert status_fingerprint({"a": 1, "b": [2]}) == status_fingerprint({"b": [2], "a": 1})
    assert status_fingerprint({"a": 1}) != status_fingerprint({"a": 2})


def test_condition_times_move_only_on_transition() -> None:
    pending = _status(build_pod(), _instance(InstanceStatus.STARTING), now=T0)
    running = _status(
        build_pod(status=pending), _instance(InstanceStatus.RUNNING, PUBLISHED), now=T1
    )
    times = {c["type"]: c["lastTransitionTime"] for c in running["conditions"]}
    assert times == {
        "PodScheduled": STAMP0,
        "Initialized": STAMP0,
        "ContainersReady": STAMP1,
        "Ready": STAMP1,
    }
    assert running["startTime"] == STAMP0
    an_hour_on = dataclasses.replace(PUBLISHED, uptime_seconds=PUBLISHED.uptime_seconds + 3600)
    later = _status(
        build_pod(status=running),
        _instance(InstanceStatus.RUNNING, an_hour_on),
        now=T1 + timedelta(hours=1),
    )
    assert later == running


_INSTANCES = st.one_of(
    st.none(),
    st.builds(
        _instance,
        st.sampled_from(list(InstanceStatus)),
        st.sampled_from([None, Runtime(), PUBLISHED]),
    ),
)


@given(
    st.lists(
        st.tuples(
            _INSTANCES,
            st.sampled_from([None, 0, 1]),
            st.sampled_from([None, PodReason.INSTANCE_LOST]),
        ),
        min_size=1,
        max_size=5,
    ),
    st.booleans(),
)
def test_a_patched_status_is_a_fixed_point(
    steps: list[tuple[Instance | None, int | None, str | None]], pending: bool
) -> None:
    """Whatever happened before, recomputing from the patched pod later changes nothing."""
    pod = build_pod()
    now = T0
    for instance, exit_code, reason in steps:
        status = pod_status(
            pod, instance, exit_code=exit_code, now=now, reason=reason, pending=pending
        )
        pod = {**pod, "status": status}
        now += timedelta(minutes=1)
        # A minute on, the same container has run a minute longer.
        later = instance
        if instance is not None and instance.runtime is not None:
            older = instance.runtime.uptime_seconds + 60
            later = dataclasses.replace(
                instance, runtime=dataclasses.replace(instance.runtime, uptime_seconds=older)
            )
        again = pod_status(pod, later, exit_code=exit_code, now=now, reason=reason, pending=pending)
        assert status_fingerprint(again) == status_fingerprint(status)


# --- metadata ------------------------------------------------------------------------


def test_metadata_annotations() -> None:
    instance = _instance(
        InstanceStatus.RUNNING,
        PUBLISHED,
        cost_per_hr=0.69,
        gpu_type_id="NVIDIA GeForce RTX 4090",
        datacenter_id="EU-RO-1",
    )
    assert metadata_annotations(instance) == {
        "runpod.io/pod-id": "abc123",
        "runpod.io/cost-per-hr": "0.69",
        "runpod.io/gpu-type": "NVIDIA GeForce RTX 4090",
        "runpod.io/datacenter": "EU-RO-1",
        "runpod.io/public-ip": "203.0.113.7",
        "runpod.io/port-mappings": (
            "8888/http->https://abc123-8888.proxy.runpod.net, 22/tcp->203.0.113.7:40022"
        ),
    }


def test_metadata_of_a_provisioning_instance_leaves_unknowns_out() -> None:
    assert metadata_annotations(_instance(InstanceStatus.PROVISIONING, cost_per_hr=2.0)) == {
        "runpod.io/pod-id": "abc123",
        "runpod.io/cost-per-hr": "2",
        "runpod.io/port-mappings": "8888/http->https://abc123-8888.proxy.runpod.net",
    }


# --- mirror key ----------------------------------------------------------------------

_MIRRORED = st.builds(
    Instance,
    id=st.sampled_from(["abc123", "def456"]),
    name=st.sampled_from(["ml-train-0f1e2d3c", "renamed"]),
    status=st.sampled_from(
        [InstanceStatus.PROVISIONING, InstanceStatus.STARTING, InstanceStatus.RUNNING]
    ),
    image=st.sampled_from(["", "ghcr.io/acme/train:2"]),
    env=st.sampled_from([{}, {"A": "1"}]),
    cost_per_hr=st.sampled_from([0.0, 0.69, 1.19]),
    gpu_type_id=st.sampled_from([None, "NVIDIA GeForce RTX 4090"]),
    gpu_count=st.sampled_from([0, 1, 2]),
    cloud=st.sampled_from([None, "SECURE"]),
    datacenter_id=st.sampled_from([None, "EU-RO-1", "US-TX-3"]),
    ports=st.sampled_from([(), ("22/tcp",), ("8888/http", "22/tcp")]),
    created_at=st.sampled_from([None, T0]),
    started_at=st.sampled_from([None, T0, T1]),
    runtime=st.sampled_from(
        [
            None,
            Runtime(),
            PUBLISHED,
            dataclasses.replace(PUBLISHED, uptime_seconds=90),
            Runtime(ports=(PortMapping(22, "tcp", public_ip="198.51.100.9", public_port=41022),)),
        ]
    ),
    actions=st.sampled_from([(), ("stop", "terminate")]),
)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Instance)])
@given(first=_MIRRORED, other=_MIRRORED, before=_INSTANCES)
@settings(max_examples=60)
def test_equal_mirror_keys_mean_equal_status_and_annotations(
    field: str, first: Instance, other: Instance, before: Instance | None
) -> None:
    """One instance field changes: the key changes whenever the outputs could."""
    second = dataclasses.replace(first, **{field: getattr(other, field)})
    pod = build_pod(status=_status(build_pod(), before) if before else None)
    pod["metadata"]["resourceVersion"] = "41"
    if mirror_key(pod, first, T1) == mirror_key(pod, second, T1):
        assert _status(pod, first, now=T1) == _status(pod, second, now=T1)
        assert metadata_annotations(first) == metadata_annotations(second)


def test_the_mirror_key_holds_when_the_container_restarted() -> None:
    """Two restarts at different times, seen on the same pod, give different statuses (the
    restart's end and the new start), so they must not share a key: a row holding the
    first key would otherwise never show the second."""
    pod = build_pod(status=_status(build_pod(), _instance(InstanceStatus.RUNNING, PUBLISHED)))
    pod["metadata"]["resourceVersion"] = "41"
    early = _instance(InstanceStatus.RUNNING, dataclasses.replace(PUBLISHED, uptime_seconds=90))
    late = _instance(InstanceStatus.RUNNING, PUBLISHED)
    assert _status(pod, early, now=T1) != _status(pod, late, now=T1)
    assert mirror_key(pod, early, T1) != mirror_key(pod, late, T1)


def test_mirror_key_follows_the_resource_version() -> None:
    pod, instance = build_pod(), _instance(InstanceStatus.RUNNING, PUBLISHED)
    assert mirror_key(pod, instance, T1) is None  # nothing would tell that the pod changed
    pod["metadata"]["resourceVersion"] = "41"
    first = mirror_key(pod, instance, T1)
    assert first is not None and mirror_key(pod, instance, T1) == first
    pod["metadata"]["resourceVersion"] = "42"
    assert mirror_key(pod, instance, T1) != first


def test_the_mirror_key_of_known_inputs_stays_what_rows_already_hold() -> None:
    """Rows keep the key: a new way of computing it that gave other digests would make
    the first tick after an upgrade compute and rewrite the row of every pod."""
    pod: KubeObject = {
        "metadata": {"uid": "u-1", "resourceVersion": "42"},
        "status": {
            "containerStatuses": [{"state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
        },
    }
    instance = Instance(
        "i-1",
        "default-web-1",
        InstanceStatus.RUNNING,
        image="img:1",
        cost_per_hr=0.69,
        gpu_type_id="NVIDIA GeForce RTX 4090",
        datacenter_id="US-TX-3",
        ports=("8888/http", "22/tcp"),
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        runtime=Runtime(300, (PortMapping(22, "tcp", "1.2.3.4", 40022),)),
    )
    now = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    assert mirror_key(pod, instance, now) == "3ba68d05f4e225cb"
    shown_nothing: KubeObject = {"metadata": {"resourceVersion": "42"}, "status": {}}
    assert mirror_key(shown_nothing, instance, now) == "9b558787c588fd68"
    starting = Instance("i-1", "n", InstanceStatus.STARTING)
    assert mirror_key(shown_nothing, starting, now) == "56ae4fbc76cab812"


def test_mirror_key_ignores_the_uptime() -> None:
    """RunPod's uptime grows on every list; a steady pod must keep its key."""
    older = _instance(InstanceStatus.RUNNING, PUBLISHED)
    pod = build_pod(status=_status(build_pod(), older, now=T1))  # it shows the running start
    pod["metadata"]["resourceVersion"] = "41"
    newer = _instance(InstanceStatus.RUNNING, dataclasses.replace(PUBLISHED, uptime_seconds=45))
    later = T1 + timedelta(seconds=15)
    assert mirror_key(pod, older, T1) == mirror_key(pod, newer, later)
    # A container RunPod started again (a minute later than the pod shows) changes it.
    restarted = _instance(InstanceStatus.RUNNING, dataclasses.replace(PUBLISHED, uptime_seconds=5))
    assert mirror_key(pod, restarted, later + timedelta(minutes=1)) != mirror_key(pod, older, T1)
