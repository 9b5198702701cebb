"""Server-side printing: the `Table` kubectl asks for when it prints `kubectl get`.

The columns and cells follow kube-apiserver's printers (pkg/printers/internalversion):
for pods NAME READY STATUS RESTARTS AGE, STATUS being the reason kubectl users know
(a waiting or terminated container's reason, `Terminating`, `Completed`...), and the
`-o wide` columns IP NODE NOMINATED NODE READINESS GATES; for nodes NAME STATUS ROLES
AGE VERSION and INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME; for
Jobs NAME STATUS COMPLETIONS DURATION AGE and CONTAINERS IMAGES SELECTOR; for
StorageClasses NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE;
for Events LAST SEEN TYPE REASON OBJECT MESSAGE and SUBOBJECT SOURCE FIRST SEEN COUNT
NAME; for PersistentVolumeClaims NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS
VOLUMEATTRIBUTESCLASS AGE and VOLUMEMODE; for PersistentVolumes NAME CAPACITY ACCESS MODES
RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE and VOLUMEMODE. The
server always fills every column; kubectl shows priority-1 columns only with `-o wide`.
A single object (`kubectl get pod NAME`) is a Table of one row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from reconciler.sim.kube import table_services
from reconciler.sim.kube.resources import (
    ENDPOINT_SLICES,
    EVENTS,
    JOBS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    SERVICES,
    STORAGE_CLASSES,
    Resource,
)

Cells = Callable[[dict[str, Any], datetime], list[Any]]
Column = tuple[str, int]  # (name, priority)

_NAME_COLUMN = ("Name", 0)
_NODE_ROLE_PREFIX = "node-role.kubernetes.io/"


def table_for(
    resource: Resource,
    objects: Sequence[dict[str, Any]],
    now: datetime,
    resource_version: str,
    continue_token: str = "",
    include_object: str = "Metadata",
    listed: bool = True,
) -> dict[str, Any]:
    """The Table the API server serves for a list (or, `listed` False, one object)."""
    columns, cells = _PRINTERS.get(resource, ((_NAME_COLUMN, ("Age", 0)), _default_cells))
    rows = [
        {"cells": cells(obj, now), "object": _row_object(obj, include_object)} for obj in objects
    ]
    if resource is STORAGE_CLASSES and listed:
        _mark_default(objects, rows)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [
            {
                "name": name,
                "type": "string",
                "format": "name" if name == "Name" else "",
                "description": name,
                "priority": priority,
            }
            for name, priority in columns
        ],
        "rows": rows,
    }


def _row_object(obj: dict[str, Any], include_object: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }


def _default_cells(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [obj["metadata"]["name"], human_age(obj["metadata"]["creationTimestamp"], now)]


# --- pods ---------------------------------------------------------------------------

_POD_COLUMNS: tuple[Column, ...] = (
    _NAME_COLUMN,
    ("Ready", 0),
    ("Status", 0),
    ("Restarts", 0),
    ("Age", 0),
    ("IP", 1),
    ("Node", 1),
    ("Nominated Node", 1),
    ("Readiness Gates", 1),
)


def _pod_cells(pod: dict[str, Any], now: datetime) -> list[Any]:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    reason, ready, restarts, last_restart = pod_status_reason(pod)
    shown_restarts = str(restarts)
    if restarts and last_restart:
        shown_restarts = f"{restarts} ({human_age(last_restart, now)} ago)"
    pod_ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    gates_shown = (
        f"{sum(1 for g in gates if conditions.get(g.get('conditionType')) == 'True')}/{len(gates)}"
        if gates
        else "<none>"
    )
    return [
        meta["name"],
        f"{ready}/{len(spec.get('containers') or []) + _sidecar_count(spec)}",
        reason,
        shown_restarts,
        human_age(meta["creationTimestamp"], now),
        (pod_ips[0].get("ip") if pod_ips else "") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_shown,
    ]


def _sidecar_count(spec: dict[str, Any]) -> int:
    return sum(1 for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always")


def pod_status_reason(pod: dict[str, Any]) -> tuple[str, int, int, str | None]:
    """printPod's STATUS, ready containers, restarts and the last restart's time.
    Restartable init containers (sidecars: restartPolicy Always) count among the
    containers, ready and restarted as they are."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    conditions = status.get("conditions") or []
    if any(
        c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in conditions
    ):
        reason = "SchedulingGated"
    sidecars = {
        c.get("name")
        for c in spec.get("initContainers") or []
        if c.get("restartPolicy") == "Always"
    }
    restarts, last_restart, ready = 0, "", 0
    sidecar_restarts, sidecar_last = 0, ""
    initializing = False
    init_total = len(spec.get("initContainers") or [])
    for index, container in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(container.get("restartCount") or 0)
        last_restart = max(last_restart, _last_finished(container))
        sidecar = container.get("name") in sidecars
        if sidecar:
            sidecar_restarts += int(container.get("restartCount") or 0)
            sidecar_last = max(sidecar_last, _last_finished(container))
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if sidecar and container.get("started"):
            ready += 1 if container.get("ready") else 0
            continue
        if terminated is not None:
            reason = "Init:" + (terminated.get("reason") or _exit_text(terminated))
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{index}/{init_total}"
        initializing = True
        break
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions
    )
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, sidecar_last
        running, error = False, ""
        for container in reversed(status.get("containerStatuses") or []):
            restarts += int(container.get("restartCount") or 0)
            last_restart = max(last_restart, _last_finished(container))
            state = container.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None:
                reason = terminated.get("reason") or _exit_text(terminated)
                if terminated.get("exitCode", 0) != 0:
                    error = reason
            elif container.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed":
            ready_condition = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
            )
            if running and ready_condition:
                reason = "Running"
            elif error:
                reason = error
            elif running:
                reason = "NotReady"
    deleting = pod["metadata"].get("deletionTimestamp") is not None
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason, ready, restarts, last_restart or None


def _last_finished(container: dict[str, Any]) -> str:
    terminated = (container.get("lastState") or {}).get("terminated") or {}
    return str(terminated.get("finishedAt") or "")


def _exit_text(terminated: dict[str, Any]) -> str:
    if terminated.get("signal"):
        return f"Signal:{terminated['signal']}"
    return f"ExitCode:{terminated.get('exitCode', 0)}"


# --- nodes --------------------------------------------------------------------------

_NODE_COLUMNS: tuple[Column, ...] = (
    _NAME_COLUMN,
    ("Status", 0),
    ("Roles", 0),
    ("Age", 0),
    ("Version", 0),
    ("Internal-IP", 1),
    ("External-IP", 1),
    ("OS-Image", 1),
    ("Kernel-Version", 1),
    ("Container-Runtime", 1),
)


def _node_cells(node: dict[str, Any], now: datetime) -> list[Any]:
    meta, status = node["metadata"], node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    shown = (
        ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    )
    if (node.get("spec") or {}).get("unschedulable"):
        shown.append("SchedulingDisabled")
    info = status.get("nodeInfo") or {}
    return [
        meta["name"],
        ",".join(shown),
        ",".join(_node_roles(meta.get("labels") or {})) or "<none>",
        human_age(meta["creationTimestamp"], now),
        info.get("kubeletVersion", ""),
        _address(status, "InternalIP"),
        _address(status, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _node_roles(labels: dict[str, str]) -> list[str]:
    roles = {
        key.removeprefix(_NODE_ROLE_PREFIX)
        for key in labels
        if key.startswith(_NODE_ROLE_PREFIX) and key != _NODE_ROLE_PREFIX
    }
    if labels.get("kubernetes.io/role"):
        roles.add(labels["kubernetes.io/role"])
    return sorted(roles)


def _address(status: dict[str, Any], kind: str) -> str:
    return (
        next(
            (a.get("address") for a in status.get("addresses") or [] if a.get("type") == kind), None
        )
        or "<none>"
    )


# --- time ---------------------------------------------------------------------------


def human_age(since: str, now: datetime) -> str:
    """apimachinery's duration.HumanDuration, as in the AGE column."""
    seconds = int((now - datetime.fromisoformat(since.replace("Z", "+00:00"))).total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 120:
        return f"{max(0, seconds)}s"
    minutes, hours = seconds // 60, seconds // 3600
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


# --- jobs ---------------------------------------------------------------------------

_JOB_COLUMNS: tuple[Column, ...] = (
    _NAME_COLUMN,
    ("Status", 0),
    ("Completions", 0),
    ("Duration", 0),
    ("Age", 0),
    ("Containers", 1),
    ("Images", 1),
    ("Selector", 1),
)


def _job_cells(job: dict[str, Any], now: datetime) -> list[Any]:
    """printJob: succeeded/completions (or "n/1 of parallelism" for a work queue),
    the status the conditions say, and how long it ran (while running, until now)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    parallelism = int(spec.get("parallelism") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif parallelism > 1:
        completions = f"{succeeded}/1 of {parallelism}"
    else:
        completions = f"{succeeded}/1"
    started, ended = status.get("startTime"), status.get("completionTime")
    duration = ""
    if started:
        until = datetime.fromisoformat(ended.replace("Z", "+00:00")) if ended else now
        duration = human_age(started, until)
    template = (spec.get("template") or {}).get("spec") or {}
    containers = template.get("containers") or []
    return [
        job["metadata"]["name"],
        _job_status(job),
        completions,
        duration,
        human_age(job["metadata"]["creationTimestamp"], now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        _label_selector(spec.get("selector")),
    ]


def _job_status(job: dict[str, Any]) -> str:
    """printJob's order: a finished Job says so even while it is being deleted."""
    status = job.get("status") or {}
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    for kind in ("Complete", "Failed"):
        if kind in true:
            return kind
    if job["metadata"].get("deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if kind in true:
            return kind
    return "Running"


def _label_selector(selector: dict[str, Any] | None) -> str:
    """metav1.FormatLabelSelector: labels.Selector's String(), requirements sorted by
    key; "<none>" for none."""
    if not selector:
        return "<none>"
    parts = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = ",".join(sorted(expression.get("values") or []))
        shown = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(operator, f"{key} {operator} ({values})")
        parts.append((key, shown))
    return ",".join(text for _, text in sorted(parts)) or "<none>"


# --- storage classes and events -----------------------------------------------------

_STORAGE_CLASS_COLUMNS: tuple[Column, ...] = (
    _NAME_COLUMN,
    ("Provisioner", 0),
    ("ReclaimPolicy", 0),
    ("VolumeBindingMode", 0),
    ("AllowVolumeExpansion", 0),
    ("Age", 0),
)
_DEFAULT_CLASSES = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def _mark_default(classes: Sequence[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """printStorageClassList (v1.37): only the effective default is marked " (default)",
    the newest class annotated as default (of two as old, the first by name); printing
    one class marks none."""
    marked = [
        (sc["metadata"]["creationTimestamp"], sc["metadata"]["name"])
        for sc in classes
        if any((sc["metadata"].get("annotations") or {}).get(k) == "true" for k in _DEFAULT_CLASSES)
    ]
    if not marked:
        return
    newest = max(created for created, _ in marked)
    effective = min(name for created, name in marked if created == newest)
    for row in rows:
        if row["cells"][0] == effective:
            row["cells"][0] += " (default)"


def _storage_class_cells(sc: dict[str, Any], now: datetime) -> list[Any]:
    """printStorageClass: the API server's defaults where a field is unset."""
    meta = sc["metadata"]
    return [
        meta["name"],
        sc.get("provisioner", ""),
        sc.get("reclaimPolicy") or "Delete",
        sc.get("volumeBindingMode") or "Immediate",
        str(bool(sc.get("allowVolumeExpansion"))).lower(),
        human_age(meta["creationTimestamp"], now),
    ]


_EVENT_COLUMNS: tuple[Column, ...] = (
    ("Last Seen", 0),
    ("Type", 0),
    ("Reason", 0),
    ("Object", 0),
    ("Subobject", 1),
    ("Source", 1),
    ("Message", 0),
    ("First Seen", 1),
    ("Count", 1),
    ("Name", 1),
)


def _event_cells(event: dict[str, Any], now: datetime) -> list[Any]:
    """printEvent: the object as kind/name (kind lowercased), the source as
    "component, host"; times fall back to eventTime, then the object's creation."""
    meta, target = event["metadata"], event.get("involvedObject") or {}
    first = _since(event.get("firstTimestamp") or event.get("eventTime"), now)
    last = _since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = int(event.get("count") or 0) or 1  # singleton events of the new API have none
    series = event.get("series")
    if series:
        last = _since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    kind = str(target.get("kind", "")).lower()
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        f"{kind}/{target['name']}" if target.get("name") else kind,
        target.get("fieldPath", ""),
        f"{component}, {instance}" if instance else component,
        event.get("message", "").strip(),
        first,
        count,
        meta["name"],
    ]


def _since(moment: str | None, now: datetime) -> str:
    """translateTimestampSince: "<unknown>" for a zero time."""
    return human_age(moment, now) if moment else "<unknown>"


_CLAIM_COLUMNS: tuple[Column, ...] = (
    _NAME_COLUMN,
    ("Status", 0),
    ("Volume", 0),
    ("Capacity", 0),
    ("Access Modes", 0),
    ("StorageClass", 0),
    ("VolumeAttributesClass", 0),
    ("Age", 0),
    ("VolumeMode", 1),
)
_VOLUME_COLUMNS: tuple[Column, ...] = (
    _NAME_COLUMN,
    ("Capacity", 0),
    ("Access Modes", 0),
    ("Reclaim Policy", 0),
    ("Status", 0),
    ("Claim", 0),
    ("StorageClass", 0),
    ("VolumeAttributesClass", 0),
    ("Reason", 0),
    ("Age", 0),
    ("VolumeMode", 1),
)
_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)
_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"


def _access_modes(modes: Sequence[str] | None) -> str:
    """helper.GetAccessModesAsString: the short names, in this order, whatever the list's."""
    return ",".join(short for mode, short in _ACCESS_MODES if mode in (modes or ()))


def _volume_class(obj: dict[str, Any]) -> str:
    """GetPersistentVolume(Claim)Class: the beta annotation first, then the field."""
    beta = (obj["metadata"].get("annotations") or {}).get(_BETA_CLASS)
    return str(beta if beta is not None else obj["spec"].get("storageClassName") or "")


def _phase(obj: dict[str, Any]) -> str:
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return str((obj.get("status") or {}).get("phase") or "")


def _claim_cells(claim: dict[str, Any], now: datetime) -> list[Any]:
    """printPersistentVolumeClaim: capacity and access modes from the status, only once
    the claim names a volume."""
    spec, status = claim["spec"], claim.get("status") or {}
    capacity = modes = ""
    if spec.get("volumeName"):
        modes = _access_modes(status.get("accessModes"))
        capacity = str((status.get("capacity") or {}).get("storage") or "")
    return [
        claim["metadata"]["name"],
        _phase(claim),
        spec.get("volumeName") or "",
        capacity,
        modes,
        _volume_class(claim),
        spec.get("volumeAttributesClassName") or "<unset>",
        human_age(claim["metadata"]["creationTimestamp"], now),
        spec.get("volumeMode") or "<unset>",
    ]


def _volume_cells(pv: dict[str, Any], now: datetime) -> list[Any]:
    """printPersistentVolume: the claim as namespace/name."""
    spec, status = pv["spec"], pv.get("status") or {}
    ref = spec.get("claimRef")
    return [
        pv["metadata"]["name"],
        str((spec.get("capacity") or {}).get("storage") or ""),
        _access_modes(spec.get("accessModes")),
        spec.get("persistentVolumeReclaimPolicy") or "",
        _phase(pv),
        f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else "",
        _volume_class(pv),
        spec.get("volumeAttributesClassName") or "<unset>",
        status.get("reason") or "",
        human_age(pv["metadata"]["creationTimestamp"], now),
        spec.get("volumeMode") or "<unset>",
    ]


_PRINTERS: dict[Resource, tuple[tuple[Column, ...], Cells]] = {
    PERSISTENT_VOLUME_CLAIMS: (_CLAIM_COLUMNS, _claim_cells),
    PERSISTENT_VOLUMES: (_VOLUME_COLUMNS, _volume_cells),
    STORAGE_CLASSES: (_STORAGE_CLASS_COLUMNS, _storage_class_cells),
    EVENTS: (_EVENT_COLUMNS, _event_cells),
    PODS: (_POD_COLUMNS, _pod_cells),
    NODES: (_NODE_COLUMNS, _node_cells),
    JOBS: (_JOB_COLUMNS, _job_cells),
    SERVICES: (
        table_services.SERVICE_COLUMNS,
        lambda o, now: table_services.service_cells(o, _age_of(o, now)),
    ),
    ENDPOINT_SLICES: (
        table_services.SLICE_COLUMNS,
        lambda o, now: table_services.slice_cells(o, _age_of(o, now)),
    ),
}


def _age_of(obj: dict[str, Any], now: datetime) -> str:
    return human_age(obj["metadata"]["creationTimestamp"], now)
