"""What the API server does with a pod's status on every write, and what it refuses.

Two parts, as in kube-apiserver:
- `normalize_pod_status`: the JSON -> Go struct -> JSON round trip. Fields without
  `omitempty` always come back (a container status without `imageID` reads back with
  `imageID: ""`, a state as `{}`), and the v1 -> internal conversion makes `podIP`
  authoritative over `podIPs` (a `podIPs` whose first entry differs is replaced by
  `[podIP]`; a `podIP` alone fills `podIPs`), while `hostIPs` gets no such repair.
- `pod_status_causes`: `ValidatePodStatusUpdate` of pkg/apis/core/validation for the
  fields a kubelet writes: valid and dual-stack-only `podIPs`/`hostIPs`, `hostIPs[0]`
  equal to `hostIP`, no duplicates, an immutable `qosClass`, and no container leaving
  the terminated state unless the restart policy restarts it.

Two rules are the kubelet's contract rather than the API server's validation, and the
simulator enforces them so that a kubelet-like client breaking them fails a test:
a pod in a terminal phase (Succeeded, Failed) never changes phase again (the kubelet's
status manager refuses to, and the Job controller has already counted the pod), and a
container state has exactly one of `waiting`, `running`, `terminated` (the API
documents "only one of its members may be specified"; printers and clients read the
first one they find).
"""

from __future__ import annotations

import ipaddress
from typing import Any

Causes = list[tuple[str, str]]
TERMINAL_PHASES = ("Succeeded", "Failed")
_STATE_MEMBERS = ("waiting", "running", "terminated")
_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
# ContainerStatus fields without omitempty, with Go's zero values.
_REQUIRED_ZERO = {"name": "", "ready": False, "restartCount": 0, "image": "", "imageID": ""}


def normalize_pod_status(status: dict[str, Any]) -> None:
    """Fill in what Go's encoder always writes; `status` is a private copy."""
    _convert_pod_ips(status)
    for field in _STATUS_LISTS:
        for container in status.get(field) or []:
            if isinstance(container, dict):
                _normalize_container_status(container)
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict):
            condition.setdefault("lastProbeTime", None)
            condition.setdefault("lastTransitionTime", None)


def _convert_pod_ips(status: dict[str, Any]) -> None:
    pod_ip, pod_ips = status.get("podIP"), status.get("podIPs")
    first = pod_ips[0].get("ip") if pod_ips and isinstance(pod_ips[0], dict) else None
    if pod_ip and first != pod_ip:
        status["podIPs"] = [{"ip": pod_ip}]
    elif first and not pod_ip:
        status["podIP"] = first


def _normalize_container_status(container: dict[str, Any]) -> None:
    for field, zero in _REQUIRED_ZERO.items():
        if container.get(field) is None:
            container[field] = zero
    for field in ("state", "lastState"):
        state = container.get(field)
        container[field] = state if isinstance(state, dict) else {}
        terminated = container[field].get("terminated")
        if isinstance(terminated, dict):
            terminated.setdefault("exitCode", 0)
            terminated.setdefault("startedAt", None)
            terminated.setdefault("finishedAt", None)


def pod_status_causes(old: dict[str, Any], new: dict[str, Any]) -> Causes:
    """What ValidatePodStatusUpdate (plus the two contract rules above) refuses."""
    old_status, status = old.get("status") or {}, new.get("status") or {}
    causes: Causes = []
    causes += _ip_causes(status, "podIPs")
    causes += _host_ip_causes(status)
    if old_status.get("qosClass") and status.get("qosClass") != old_status.get("qosClass"):
        causes.append(("status.qosClass", "Invalid value: field is immutable"))
    restart_policy = (old.get("spec") or {}).get("restartPolicy", "Always")
    causes += _transition_causes(
        old_status.get("containerStatuses") or [],
        status.get("containerStatuses") or [],
        restart_policy,
    )
    old_phase = old_status.get("phase")
    if old_phase in TERMINAL_PHASES and status.get("phase") != old_phase:
        causes.append(
            (
                "status.phase",
                f"Forbidden: may not be changed from the terminal "
                f"phase {old_phase} (the kubelet never does)",
            )
        )
    for field in _STATUS_LISTS:
        for index, container in enumerate(status.get(field) or []):
            causes += _container_causes(f"status.{field}[{index}]", container)
    return causes


def _ip_causes(status: dict[str, Any], field: str) -> Causes:
    entries = status.get(field) or []
    causes: Causes = []
    addresses = []
    for index, entry in enumerate(entries):
        value = entry.get("ip") if isinstance(entry, dict) else None
        try:
            addresses.append(ipaddress.ip_address(str(value)))
        except ValueError:
            causes.append(
                (
                    f"status.{field}[{index}]",
                    f'Invalid value: "{value}": must be a valid IP address',
                )
            )
    if len(entries) > 1 and len(addresses) == len(entries):
        families = {address.version for address in addresses}
        if len(entries) > 2 or families != {4, 6}:
            causes.append(
                (
                    f"status.{field}",
                    "Invalid value: may specify no more than one IP for each IP family",
                )
            )
        seen: set[Any] = set()
        for index, address in enumerate(addresses):
            if address in seen:
                causes.append((f"status.{field}[{index}]", f'Duplicate value: "{address}"'))
            seen.add(address)
    return causes


def _host_ip_causes(status: dict[str, Any]) -> Causes:
    entries = status.get("hostIPs") or []
    if not entries:
        return []
    causes: Causes = []
    first = entries[0].get("ip") if isinstance(entries[0], dict) else None
    if first != status.get("hostIP", ""):
        causes.append(
            ("status.hostIPs[0].ip", f'Invalid value: "{first}": must be equal to `hostIP`')
        )
    return causes + _ip_causes(status, "hostIPs")


def _transition_causes(old: list[Any], new: list[Any], restart_policy: str) -> Causes:
    """ValidateContainerStateTransition: terminated stays terminated unless restarted."""
    if restart_policy == "Always":
        return []
    causes: Causes = []
    for index, before in enumerate(old):
        terminated = ((before or {}).get("state") or {}).get("terminated")
        if terminated is None:
            continue
        if terminated.get("exitCode", 0) != 0 and restart_policy == "OnFailure":
            continue
        for after in new:
            if (
                isinstance(after, dict)
                and after.get("name") == before.get("name")
                and "terminated" not in (after.get("state") or {})
            ):
                causes.append(
                    (
                        f"status.containerStatuses[{index}].state",
                        "Forbidden: may not be transitioned to non-terminated state",
                    )
                )
    return causes


def _container_causes(where: str, container: Any) -> Causes:
    if not isinstance(container, dict):
        return [(where, "Invalid value: must be an object")]
    causes: Causes = []
    for field in ("state", "lastState"):
        members = [m for m in _STATE_MEMBERS if (container.get(field) or {}).get(m) is not None]
        if len(members) > 1:
            causes.append(
                (
                    f"{where}.{field}",
                    "Invalid value: only one of "
                    f"{', '.join(_STATE_MEMBERS)} may be specified, got "
                    f"{', '.join(members)}",
                )
            )
    return causes
