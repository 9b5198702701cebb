"""Per-kind rules of the API server: defaults on create, validation, what an update may change.

Faithful where a controller could get it wrong against a real cluster (a pod's status is
reset on create, its spec is mostly immutable, label values must be strings, an event
must live in its object's namespace), and silent about everything else.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from reconciler.sim.kube import admission, nodes, services, storage
from reconciler.sim.kube.pod_status import normalize_pod_status, pod_status_causes
from reconciler.sim.kube.resources import (
    EVENTS,
    JOBS,
    LEASES,
    NODES,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
)
from reconciler.sim.kube.status import ApiError, invalid

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# metav1.MicroTime as Go parses it: exactly six fractional digits (a common client bug).
_MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")
# Pod spec fields an update may change (the rest is immutable once created).
_MUTABLE_POD_SPEC = ("activeDeadlineSeconds", "tolerations", "schedulingGates")

Causes = list[tuple[str, str]]


def prepare_for_create(resource: Resource, obj: dict[str, Any]) -> None:
    """Fill the defaults the API server adds; `obj` is a private copy."""
    if resource is PODS:
        _default_pod(obj)
        admission.default_toleration_seconds(obj)
        admission.service_account_token(obj)
    elif resource is SECRETS:
        _fold_string_data(obj)
        obj.setdefault("type", "Opaque")
    elif resource is JOBS:
        _generate_selector(obj)
    elif resource.plural == "namespaces":
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    else:
        storage.prepare_for_create(resource, obj)
        services.prepare_for_create(resource, obj)


def _generate_selector(job: dict[str, Any]) -> None:
    """generateSelector (pkg/registry/batch/job/strategy.go), unless manualSelector: the
    template gets the job-name and controller-uid labels (both spellings) and the
    selector matches the uid, so the Job's pods are its own alone."""
    spec = job.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return
    meta = job["metadata"]
    template = spec.get("template")
    if isinstance(template, dict):
        template_meta = template.setdefault("metadata", {})
        labels = template_meta.get("labels") or {}
        for key in ("job-name", "batch.kubernetes.io/job-name"):
            labels.setdefault(key, meta["name"])
        for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
            labels.setdefault(key, meta["uid"])
        template_meta["labels"] = labels
    selector = spec.get("selector") or {}
    match = selector.get("matchLabels") or {}
    match.setdefault("batch.kubernetes.io/controller-uid", meta["uid"])
    spec["selector"] = {**selector, "matchLabels": match}
    spec.setdefault("manualSelector", False)


def prepare_for_update(resource: Resource, old: dict[str, Any], new: dict[str, Any]) -> None:
    """What an update keeps of the stored object that the client left out."""
    if resource is SERVICES:
        services.keep_allocated(old, new)


def prepare_for_write(resource: Resource, obj: dict[str, Any]) -> None:
    """Normalisation applied to every create and update."""
    if resource is SECRETS:
        _fold_string_data(obj)
    elif resource is NODES:
        nodes.canonicalize_node(obj)
    elif resource is PODS:
        nodes.canonicalize_pod(obj)
        if isinstance(obj.get("status"), dict):
            normalize_pod_status(obj["status"])
    else:
        storage.prepare_for_write(resource, obj)
        services.prepare_for_write(resource, obj)


def validate(resource: Resource, obj: dict[str, Any]) -> None:
    # A Service's name has its own rule, an RFC 1123 label (services).
    causes = (
        _metadata_causes(obj) if resource is not SERVICES or not obj["metadata"].get("name") else []
    )
    if resource is PODS:
        causes += _pod_causes(obj)
    elif resource is JOBS:
        causes += _job_causes(obj.get("spec") or {})
    elif resource is EVENTS:
        causes += _event_causes(obj)
    elif resource is SECRETS:
        causes += _secret_causes(obj)
    elif resource is NODES:
        causes += nodes.node_causes(obj)
    if causes:
        raise invalid(resource.kind, obj.get("metadata", {}).get("name", ""), causes)
    storage.validate(resource, obj)
    services.validate(resource, obj)


def validate_update(resource: Resource, old: dict[str, Any], new: dict[str, Any]) -> None:
    _check_no_new_finalizers(resource, old, new)
    if resource is NODES and (causes := nodes.node_update_causes(old, new)):
        raise invalid("Node", new["metadata"]["name"], causes)
    storage.validate_update(resource, old, new)
    services.validate_update(resource, old, new)
    if resource is not PODS:
        return
    if old.get("status") != new.get("status"):
        causes = pod_status_causes(old, new)
        if causes:
            raise invalid("Pod", new["metadata"]["name"], causes)
    if _masked_pod_spec(old.get("spec", {})) != _masked_pod_spec(new.get("spec", {})):
        raise invalid(
            "Pod",
            new["metadata"]["name"],
            [
                (
                    "spec",
                    "Forbidden: pod updates may not change fields other than "
                    "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                    "`spec.activeDeadlineSeconds`, `spec.tolerations`, `spec.schedulingGates`",
                )
            ],
        )


def _check_no_new_finalizers(resource: Resource, old: dict[str, Any], new: dict[str, Any]) -> None:
    """apimachinery's ValidateNoNewFinalizers: an object being deleted may lose
    finalizers, never gain one (a controller must hold it before the delete)."""
    if not old["metadata"].get("deletionTimestamp"):
        return
    added = sorted(
        set(new["metadata"].get("finalizers") or ()) - set(old["metadata"].get("finalizers") or ())
    )
    if added:
        listed = ", ".join(f'"{name}"' for name in added)
        raise invalid(
            resource.kind,
            new["metadata"]["name"],
            [
                (
                    "metadata.finalizers",
                    "Forbidden: no new finalizers can be added if the object is being "
                    f"deleted, found new finalizers []string{{{listed}}}",
                )
            ],
        )


def check_json_types(resource: Resource, obj: dict[str, Any]) -> None:
    """Reject what Go's decoder rejects before validation even runs (400, not 422)."""
    if resource is LEASES:
        for field in ("acquireTime", "renewTime"):
            value = (obj.get("spec") or {}).get(field)
            if value is not None and not _MICRO_TIME.fullmatch(str(value)):
                raise ApiError(
                    400,
                    f'parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse',
                    "BadRequest",
                )
    if resource is JOBS:
        _check_job_counts(obj.get("spec") or {})
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        raise ApiError(400, "Object 'metadata' is missing or not an object", "BadRequest")
    for field in ("labels", "annotations"):
        values = metadata.get(field) or {}
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise ApiError(
                400,
                f"json: cannot unmarshal into Go struct field "
                f"ObjectMeta.metadata.{field} of type string",
                "BadRequest",
            )


def _check_job_counts(spec: dict[str, Any]) -> None:
    """JobSpec's counts are *int32: a number past it fails Go's decoder."""
    for field in ("parallelism", "completions", "backoffLimit"):
        value = spec.get(field)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31
        ):
            raise ApiError(
                400,
                f"json: cannot unmarshal number {value} into Go struct field "
                f"JobSpec.spec.{field} of type int32",
                "BadRequest",
            )


def _metadata_causes(obj: dict[str, Any]) -> Causes:
    name = obj["metadata"].get("name") or ""
    if not name:
        return [("metadata.name", "Required value: name or generateName is required")]
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        return [
            (
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain '
                "must consist of lower case alphanumeric characters, '-' or '.'",
            )
        ]
    return []


def _pod_causes(obj: dict[str, Any]) -> Causes:
    containers = obj.get("spec", {}).get("containers")
    if not isinstance(containers, list) or not containers:
        return [("spec.containers", "Required value")]
    causes: Causes = []
    for index, container in enumerate(containers):
        for field in ("name", "image"):
            if not (isinstance(container, dict) and container.get(field)):
                causes.append((f"spec.containers[{index}].{field}", "Required value"))
    return causes


def _job_causes(spec: dict[str, Any]) -> Causes:
    causes: Causes = []
    if not isinstance(spec.get("template"), dict):
        causes.append(("spec.template", "Required value"))
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        causes.append(("spec.completionMode", f'Unsupported value: "{mode}"'))
    elif mode == "Indexed" and spec.get("completions") is None:
        causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
    for field in ("parallelism", "completions", "backoffLimit"):
        value = spec.get(field)
        if value is None:
            continue
        if isinstance(value, int) and value < 0:  # ValidateNonnegativeField
            causes.append(
                (f"spec.{field}", f"Invalid value: {value}: must be greater than or equal to 0")
            )
    parallelism = spec.get("parallelism")
    if (
        mode == "Indexed"
        and isinstance(parallelism, int)
        and parallelism > _MAX_INDEXED_PARALLELISM
    ):
        causes.append(
            (
                "spec.parallelism",
                f"Invalid value: {parallelism}: must be less than or equal to "
                f"{_MAX_INDEXED_PARALLELISM} when completion mode is Indexed",
            )
        )
    return causes


# pkg/apis/batch/validation: maxParallelismForIndexedJob (completions may be far more:
# the Job controller makes at most parallelism pods at a time).
_MAX_INDEXED_PARALLELISM = 100_000


def _event_causes(obj: dict[str, Any]) -> Causes:
    involved = obj.get("involvedObject") or {}
    namespace = obj["metadata"].get("namespace")
    if involved.get("namespace") and involved["namespace"] != namespace:
        return [("involvedObject.namespace", "Invalid value: does not match event.namespace")]
    return []


# Typed Secrets and the data key each must carry (the API server's ValidateSecret).
_REQUIRED_SECRET_KEYS = {"kubernetes.io/ssh-auth": "ssh-privatekey"}


def _secret_causes(obj: dict[str, Any]) -> Causes:
    data = obj.get("data") or {}
    for key, value in data.items():
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError):
            return [(f"data[{key}]", "Invalid value: illegal base64 data")]
    required = _REQUIRED_SECRET_KEYS.get(str(obj.get("type") or ""))
    if required and not data.get(required):
        return [(f"data[{required}]", "Required value")]
    return []


def _default_pod(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    for key, value in (
        ("restartPolicy", "Always"),
        ("terminationGracePeriodSeconds", 30),
        ("dnsPolicy", "ClusterFirst"),
        ("schedulerName", "default-scheduler"),
        ("serviceAccountName", "default"),
        ("securityContext", {}),
        ("enableServiceLinks", True),
        ("priority", 0),
    ):
        spec.setdefault(key, value)
    for container in spec.get("containers") or []:
        if isinstance(container, dict):
            _default_container(container)
    # The API server ignores any status a client sends on create.
    obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}


def _default_container(container: dict[str, Any]) -> None:
    image = str(container.get("image", ""))
    tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
    container.setdefault("imagePullPolicy", "IfNotPresent" if tagged else "Always")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")  # SetDefaults_ContainerPort


def _qos_class(spec: dict[str, Any]) -> str:
    resources = [
        c.get("resources") or {} for c in spec.get("containers") or [] if isinstance(c, dict)
    ]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits") and (r.get("requests") or r["limits"]) == r["limits"] for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _fold_string_data(obj: dict[str, Any]) -> None:
    """stringData is write-only: the API server folds it into base64 data."""
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _masked_pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    masked = {k: v for k, v in spec.items() if k not in _MUTABLE_POD_SPEC}
    for field in ("containers", "initContainers"):
        if isinstance(masked.get(field), list):
            masked[field] = [
                {k: v for k, v in c.items() if k != "image"}
                for c in masked[field]
                if isinstance(c, dict)
            ]
    return masked
