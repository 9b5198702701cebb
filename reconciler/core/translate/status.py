"""A RunPod instance seen as the status of the Kubernetes pod it runs.

`pod_status` is a deterministic function of its inputs: times already on the pod
(condition transitions, startTime, container start and finish) are carried over
whenever their meaning did not change, and `now` is stamped only on a real transition.
The planner fingerprints the result to patch a pod only when its status changes, so a
steady tick must produce the very same dict; and it keeps the `mirror_key` of the
inputs, so that a steady tick need not compute the status at all.

Only the chosen container runs on RunPod, so only it gets a container status, and
readiness means "every requested TCP port is published" (probes are not run).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.core.domain import Instance, InstanceStatus, KubeObject, PortMapping
from reconciler.core.reasons import PodReason
from reconciler.core.translate.annotations import (
    COST_PER_HR,
    DATACENTER,
    GPU_TYPE,
    POD_ID,
    PORT_MAPPINGS,
    PUBLIC_IP,
)
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.errors import TranslationError

CONTAINER_CREATING = "ContainerCreating"
# The reason of the containers a RunPod instance does not run (all but the chosen one).
NOT_RUN_ON_RUNPOD = "NotRunOnRunPod"
# The kubelet's reason for a container whose end it could not observe.
STATUS_UNKNOWN = "ContainerStatusUnknown"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# RunPod reports a container's uptime in whole seconds, read some seconds after the
# tick's `now`: a container start that moved by more than this is a restart.
RESTART_SLACK_SECONDS = 10
# The kubelet's exit code for a container whose end it could not observe
# (ContainerStatusUnknown); the API would read a missing exit code as 0, a success.
UNKNOWN_EXIT_CODE = 137
PROXY_URL = "https://{instance_id}-{port}.proxy.runpod.net"


@dataclass(frozen=True)
class _Outcome:
    """What the instance means for the pod, before times and names are filled in."""

    phase: str
    state: str  # waiting | running | terminated
    reason: str | None = None  # the container state's
    message: str | None = None
    exit_code: int | None = None
    pod_reason: str | None = None  # status.reason of a pod that ended

    @property
    def ready(self) -> bool:
        return self.state == "running"


def pod_status(
    pod: KubeObject,
    instance: Instance | None,
    *,
    exit_code: int | None,
    now: datetime,
    reason: PodReason | None = None,
    message: str | None = None,
    pending: bool = False,
) -> dict[str, Any]:
    """The pod's status (pods/status subresource) for the instance and the planner's reason.

    A `reason` fails the pod, with or without an instance, unless `pending` says the
    pod is waiting: then it stays Pending and `kubectl get pod` shows the reason. One
    reason can mean either (no capacity yet, no capacity for too long), so the caller,
    who knows which, says so.
    """
    current: dict[str, Any] = pod.get("status") or {}
    unknown = instance is not None and instance.status is InstanceStatus.UNKNOWN
    if current.get("phase") in TERMINAL_PHASES or (unknown and reason is None):
        # Terminal phases are final; an unknown instance status is never acted on.
        return {**copy.deepcopy(current), "phase": current.get("phase") or "Pending"}
    if reason is None:
        outcome = _outcome(instance, exit_code)
    elif pending:
        outcome = _Outcome("Pending", "waiting", reason.value, message)
    elif exit_code is not None:
        outcome = _exited(exit_code, reason, message)
    else:
        outcome = _lost(reason, message)
    return _assemble(pod, instance, outcome, now)


def deleted_status(
    pod: KubeObject, instance_id: str | None, *, exit_code: int | None, now: datetime
) -> dict[str, Any] | None:
    """The terminal status a kubelet writes for a deleted pod whose instance is gone, or
    None when the pod already shows a terminal phase.

    Succeeded only for a process that ended with 0 before the deletion; otherwise
    Failed, the container terminated with a reason: `Error` (exit 137, killed) when an
    instance ran it, `ContainerStatusUnknown` when none ever did.
    """
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return None
    if exit_code is not None:
        outcome = _exited(exit_code, None, None)
    elif instance_id:
        outcome = _Outcome(
            "Failed",
            "terminated",
            "Error",
            f"RunPod instance {instance_id} was terminated because the pod was deleted",
            UNKNOWN_EXIT_CODE,
        )
    else:
        outcome = _Outcome(
            "Failed",
            "terminated",
            STATUS_UNKNOWN,
            "no RunPod instance ran this pod before it was deleted",
        )
    return _assemble(pod, None, outcome, now)


def _outcome(instance: Instance | None, exit_code: int | None) -> _Outcome:
    if exit_code is not None:
        # The wrapper reported the end; the instance may not have stopped (or be gone).
        return _exited(exit_code, None, None)
    if instance is None:
        return _Outcome("Pending", "waiting", CONTAINER_CREATING, "waiting for a RunPod instance")
    described = f"RunPod instance {instance.id} is {instance.status.value}"
    if instance.status is InstanceStatus.RUNNING and serving(instance):
        return _Outcome("Running", "running")
    if instance.status in (InstanceStatus.PROVISIONING, InstanceStatus.STARTING):
        return _Outcome("Pending", "waiting", CONTAINER_CREATING, described)
    if instance.status is InstanceStatus.RUNNING:
        return _Outcome("Pending", "waiting", CONTAINER_CREATING, described + " (ports not ready)")
    if instance.status is InstanceStatus.ERROR:
        return _lost(PodReason.INSTANCE_ERROR, described)
    if instance.status is InstanceStatus.EXITED:
        return _lost(PodReason.EXIT_CODE_UNKNOWN, described)
    return _lost(PodReason.INSTANCE_LOST, described)


def _exited(exit_code: int, reason: PodReason | None, message: str | None) -> _Outcome:
    """The process ended with a known code; a planner `reason` still fails the pod."""
    succeeded = exit_code == 0 and reason is None
    return _Outcome(
        "Succeeded" if succeeded else "Failed",
        "terminated",
        "Completed" if exit_code == 0 else "Error",
        message,
        exit_code,
        None if reason is None else reason.value,
    )


def _lost(reason: PodReason, message: str | None) -> _Outcome:
    """The pod ended without an exit code we saw; `reason` shows in kubectl's STATUS."""
    return _Outcome("Failed", "terminated", reason.value, message, pod_reason=reason.value)


def serving(instance: Instance) -> bool:
    """Running with every requested TCP port published (HTTP ports go through the proxy)."""
    if instance.runtime is None:
        return False
    published = {p.private_port for p in instance.runtime.ports if p.public_port is not None}
    wanted = {int(port.split("/")[0]) for port in instance.ports if port.endswith("/tcp")}
    return wanted <= published


def public_ip(instance: Instance | None) -> str | None:
    ports = instance.runtime.ports if instance is not None and instance.runtime else ()
    return next((port.public_ip for port in ports if port.public_ip), None)


def _rfc3339(moment: datetime) -> str:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _assemble(
    pod: KubeObject, instance: Instance | None, outcome: _Outcome, now: datetime
) -> dict[str, Any]:
    current: dict[str, Any] = pod.get("status") or {}
    phase = outcome.phase
    if phase == "Pending" and current.get("phase") == "Running":
        # A container restarting on RunPod does not make a running pod Pending again.
        phase = "Running"
    statuses = _container_statuses(pod, instance, outcome, now)
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": _conditions(current, outcome, statuses, now),
        "startTime": current.get("startTime") or _rfc3339(now),
        "containerStatuses": statuses,
    }
    if phase in TERMINAL_PHASES and outcome.pod_reason:
        status["reason"] = outcome.pod_reason
        if outcome.message:
            status["message"] = outcome.message
    address = public_ip(instance)
    if address:
        # No podIP: the EndpointSlice controller publishes a pod's IP with the container's
        # port, and neither the host's public address (RunPod maps ports elsewhere, or
        # not at all) nor any other leads there. Without one it publishes nothing
        # (ShouldPodBeInEndpoints); the reconciler's own slices lead to the pod
        # (docs/guides/networking.md).
        status.update(hostIP=address, hostIPs=[{"ip": address}])
    return status


def _conditions(
    current: dict[str, Any], outcome: _Outcome, statuses: list[dict[str, Any]], now: datetime
) -> list[dict[str, Any]]:
    """The kubelet's conditions: ContainersReady and Ready hold when every container of
    the pod is ready, so `kubectl get`'s READY column and the conditions agree."""
    previous = {c.get("type"): c for c in current.get("conditions") or []}
    unready = [s["name"] for s in statuses if not s["ready"]]
    ready = "True" if statuses and not unready else "False"
    terminal = outcome.phase in TERMINAL_PHASES
    conditions = []
    for kind, value in (
        ("PodScheduled", "True"),
        ("Initialized", "True"),
        ("ContainersReady", ready),
        ("Ready", ready),
    ):
        before = previous.get(kind) or {}
        unchanged = before.get("status") == value and before.get("lastTransitionTime")
        condition = {
            "type": kind,
            "status": value,
            "lastTransitionTime": before["lastTransitionTime"] if unchanged else _rfc3339(now),
        }
        if value == "False":
            condition["reason"] = "PodCompleted" if terminal else "ContainersNotReady"
            if not terminal:
                condition["message"] = f"containers with unready status: [{' '.join(unready)}]"
        conditions.append(condition)
    return conditions


def _container_statuses(
    pod: KubeObject, instance: Instance | None, outcome: _Outcome, now: datetime
) -> list[dict[str, Any]]:
    """One status per container of the spec (the list is replaced whole on every patch):
    the chosen container follows the instance, the others do not run on RunPod."""
    containers = (pod.get("spec") or {}).get("containers") or []
    try:
        chosen = choose_container(pod).get("name")
    except TranslationError:
        # A status is still owed for a pod whose spec we cannot translate.
        chosen = containers[0].get("name") if containers else None
    previous = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    return [
        _chosen_status(container, instance, outcome, previous.get(chosen) or {}, now)
        if container.get("name") == chosen
        else _not_run_status(container, chosen, outcome)
        for container in containers
    ]


def _not_run_status(container: KubeObject, chosen: str | None, outcome: _Outcome) -> dict[str, Any]:
    why = {
        "reason": NOT_RUN_ON_RUNPOD,
        "message": f"a RunPod instance runs only the container {chosen}",
    }
    # Exit code 0: the container did not fail (a Job's podFailurePolicy reads exit codes).
    state = (
        {"terminated": {"exitCode": 0, **why}}
        if outcome.phase in TERMINAL_PHASES
        else {"waiting": why}
    )
    return {
        "name": container.get("name"),
        "image": container.get("image"),
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 0,
        "state": state,
    }


def _chosen_status(
    container: KubeObject,
    instance: Instance | None,
    outcome: _Outcome,
    previous: dict[str, Any],
    now: datetime,
) -> dict[str, Any]:
    restart_count = int(previous.get("restartCount") or 0)
    last_state = previous.get("lastState") or {}
    ended = _restart_end(previous, instance, outcome, now)
    if ended is not None:
        restart_count += 1
        last_state = {
            "terminated": {
                "exitCode": UNKNOWN_EXIT_CODE,
                "reason": STATUS_UNKNOWN,
                "message": "RunPod restarted the container; it does not report the exit code",
                "startedAt": (previous["state"]["running"]).get("startedAt"),
                "finishedAt": _rfc3339(ended),
            }
        }
    status: dict[str, Any] = {
        "name": container.get("name"),
        "image": container.get("image"),
        "imageID": ""
        if outcome.state == "waiting"
        else instance.image
        if instance is not None
        else previous.get("imageID") or "",
        "ready": outcome.ready,
        "started": outcome.ready,
        "restartCount": restart_count,
        "state": {outcome.state: _state(instance, outcome, previous, ended is not None, now)},
    }
    if last_state:
        status["lastState"] = last_state
    if instance is not None:
        status["containerID"] = f"runpod://{instance.id}"
    return status


def container_started_at(instance: Instance | None, now: datetime) -> datetime | None:
    """When the instance's container (re)started, from its uptime."""
    if instance is None or instance.runtime is None:
        return None
    return now - timedelta(seconds=instance.runtime.uptime_seconds)


def _restart_end(
    previous: dict[str, Any], instance: Instance | None, outcome: _Outcome, now: datetime
) -> datetime | None:
    """When the running container ended, if RunPod restarted it since the last status:
    it is no longer running, or runs again since a later start."""
    running = (previous.get("state") or {}).get("running")
    if running is None or outcome.state == "terminated":
        return None
    if outcome.state == "waiting":
        return now
    started = _parse(running.get("startedAt"))
    restarted = container_started_at(instance, now)
    if started is None or restarted is None:
        return None
    if restarted - started > timedelta(seconds=RESTART_SLACK_SECONDS):
        return restarted
    return None


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _state(
    instance: Instance | None,
    outcome: _Outcome,
    previous: dict[str, Any],
    restarted: bool,
    now: datetime,
) -> dict[str, Any]:
    state_before = previous.get("state") or {}
    was_running = (state_before.get("running") or {}).get("startedAt")
    # The container's own start (from its uptime) before the instance's: restarts are
    # told by comparing the two, so they must mean the same thing.
    container_start = container_started_at(instance, now)
    started = (
        _rfc3339(container_start)
        if container_start
        else _rfc3339(instance.started_at)
        if instance and instance.started_at
        else was_running
    )
    state: dict[str, Any]
    if outcome.state == "waiting":
        state = {"reason": outcome.reason, "message": outcome.message}
    elif outcome.state == "running":
        if was_running and not restarted:
            state = {"startedAt": was_running}
        else:
            state = {"startedAt": started or _rfc3339(now)}
    else:
        finished = (state_before.get("terminated") or {}).get("finishedAt") or _rfc3339(now)
        code = UNKNOWN_EXIT_CODE if outcome.exit_code is None else outcome.exit_code
        state = {
            "exitCode": code,
            "reason": outcome.reason,
            "message": outcome.message,
            "startedAt": was_running or started,
            "finishedAt": finished,
        }
    return {key: value for key, value in state.items() if value is not None}


def status_fingerprint(status: dict[str, Any]) -> str:
    """A stable digest of a status: equal statuses, equal fingerprints, whatever the key order."""
    encoded = json.dumps(status, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:16]


def _cost(value: float) -> str:
    # Dollars per hour without float noise or trailing zeros: 0.69, 0.165, 2.
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _port_mappings(instance: Instance) -> str:
    published: dict[int, PortMapping] = {}
    if instance.runtime is not None:
        published = {p.private_port: p for p in instance.runtime.ports if p.public_port}
    shown = []
    for port in instance.ports:
        number, _, protocol = port.partition("/")
        if protocol == "http":
            url = PROXY_URL.format(instance_id=instance.id, port=number)
            shown.append(f"{port}->{url}")
        elif int(number) in published:
            mapping = published[int(number)]
            shown.append(f"{port}->{mapping.public_ip}:{mapping.public_port}")
    return ", ".join(shown)


def mirror_key(pod: KubeObject, instance: Instance, now: datetime) -> str | None:
    """A digest of what `pod_status` (without a reason) and `metadata_annotations` read.

    The pod stands in by its resourceVersion, which any change to it renews; the instance
    by the fields read here, but not `runtime.uptime_seconds`, which grows on every tick
    and is read by neither, except for the container's start: the key holds it while
    the pod shows none, then whether (and when) RunPod restarted the container since. `now`
    is otherwise left out on purpose: it is stamped only on a time the pod does not show
    yet, so once the pod shows the status computed from these inputs, a later `now`
    gives the same status again. None without a resourceVersion, when nothing would
    tell that the pod changed.
    """
    version = pod["metadata"].get("resourceVersion")
    if not version:
        return None
    published = instance.runtime.ports if instance.runtime is not None else None
    read = (
        version,
        instance.id,
        instance.status._value_,  # `value` without its descriptor call: this runs per pod
        instance.image,
        instance.started_at,
        instance.cost_per_hr,
        instance.gpu_type_id,
        instance.datacenter_id,
        instance.ports,
        published,
        _container_start(pod, instance, now),
    )
    return hashlib.blake2b(repr(read).encode(), digest_size=8).hexdigest()


def _container_start(pod: KubeObject, instance: Instance, now: datetime) -> object:
    """What the status reads of the container's start (kept cheap: this runs for every
    pod on every tick): nothing without a runtime; whether RunPod restarted the
    container since the start the pod shows, and if so the new start; or, when the pod
    shows no start yet, the start itself (whole seconds)."""
    if instance.runtime is None:
        return None
    started = now.timestamp() - instance.runtime.uptime_seconds
    shown = False
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        start = ((status.get("state") or {}).get("running") or {}).get("startedAt")
        if start:
            if datetime.fromisoformat(start).timestamp() < started - RESTART_SLACK_SECONDS:
                # The status shows when the restart happened, so the key holds it too.
                return ("restarted", int(started))
            shown = True
    return False if shown else int(started)


def metadata_annotations(instance: Instance) -> dict[str, str]:
    """What the pod's metadata shows of its instance; keys without a known value are left out."""
    values = {
        POD_ID: instance.id,
        COST_PER_HR: _cost(instance.cost_per_hr),
        GPU_TYPE: instance.gpu_type_id,
        DATACENTER: instance.datacenter_id,
        PUBLIC_IP: public_ip(instance),
        PORT_MAPPINGS: _port_mappings(instance),
    }
    return {key: value for key, value in values.items() if value}
