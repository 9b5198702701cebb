"""The EndpointSlices the reconciler publishes so that Services selecting pods on RunPod
reach them.

The EndpointSlice controller publishes a pod at its IP with each Service port's target
port; a pod on RunPod has no IP the cluster can reach (its host's public address maps
ports elsewhere, or not at all), so the reconciler shows none (`status.podIP` stays
empty, and the controller then publishes no endpoint for it: `ShouldPodBeInEndpoints`)
and publishes its own: one slice per Service and pod, managed by `MANAGER`, labelled
with the Service's name (kube-proxy reads every slice of a Service), its one endpoint
at the reconciler's own address (`--service-endpoint-address`, its pod IP) with, for
each Service port, a port the reconciler listens on that leads to the container's
port over the instance's SSH (`direct-tcpip`). The endpoint is ready when the pod is
Ready; the slice goes when the pod goes. Only TCP ports whose target resolves to a port
of the pod are published: an endpoint that leads nowhere is never published.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.core.domain import KubeObject

MANAGER = "runpod-reconciler.runpod.io"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SERVICE_NAME = "kubernetes.io/service-name"


@dataclass(frozen=True, order=True)
class InboundPort:
    """A Service port that leads to a pod on RunPod."""

    namespace: str
    service: str
    name: str
    """The Service port's name (the slice's port name)."""
    container_port: int


def selecting(pod: KubeObject, services: Iterable[KubeObject]) -> list[InboundPort]:
    """The TCP ports of the Services of the pod's namespace whose selector selects it."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    found = []
    for service in services:
        smeta, spec = service.get("metadata") or {}, service.get("spec") or {}
        selector = spec.get("selector") or {}
        if smeta.get("namespace") != meta.get("namespace") or not selector:
            continue
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        for port in spec.get("ports") or []:
            target = _target(pod, port)
            if (port.get("protocol") or "TCP") == "TCP" and target is not None:
                name = str(port.get("name") or "")
                found.append(InboundPort(str(smeta["namespace"]), str(smeta["name"]), name, target))
    return sorted(found)


def slice_name(service: str, pod_uid: str) -> str:
    """One slice per Service and pod; a name no other manager's generateName makes."""
    digest = hashlib.sha256(f"{service}/{pod_uid}".encode()).hexdigest()[:10]
    return f"{service[:40]}-runpod-{digest}"


def slice_body(
    pod: KubeObject,
    service: KubeObject,
    node: str,
    address: str,
    listen_ports: Mapping[str, int],
) -> KubeObject:
    """The slice of `service` for `pod`: the reconciler's `address` with a listening port
    per Service port name."""
    meta, smeta = pod["metadata"], service["metadata"]
    ready = _ready(pod)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": slice_name(str(smeta["name"]), str(meta["uid"])),
            "namespace": smeta["namespace"],
            "labels": {SERVICE_NAME: smeta["name"], MANAGED_BY: MANAGER},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Service", "name": smeta["name"], "uid": smeta["uid"]}
            ],
        },
        "addressType": "IPv6" if ":" in address else "IPv4",
        "endpoints": [
            {
                "addresses": [address],
                "conditions": {"ready": ready, "serving": ready, "terminating": False},
                "nodeName": node,
                "targetRef": {
                    "kind": "Pod",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            }
        ],
        "ports": [
            {"name": name, "port": port, "protocol": "TCP"}
            for name, port in sorted(listen_ports.items())
        ],
    }


def _target(pod: KubeObject, port: KubeObject) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target and (declared.get("protocol") or "TCP") == "TCP":
                return int(declared["containerPort"])
    return None  # a named port the pod does not declare: the Service has no endpoint here


def _ready(pod: KubeObject) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
