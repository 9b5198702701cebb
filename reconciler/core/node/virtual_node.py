"""The virtual node as the reconciler registers it, and what its live state allows.

Pure: the settings, the cluster's version and the clock in; the Node object out. The
adapter writes it; `admits` reads the live Node back (cordon, taints) for offload mode.
"""

from __future__ import annotations

import re
from datetime import datetime

from reconciler.core.config import Settings
from reconciler.core.domain import KubeObject
from reconciler.core.quantity import canonical_quantity

PROVIDER_TAINT = {"key": "virtual-kubelet.io/provider", "value": "runpod", "effect": "NoSchedule"}
# Until the cluster's own version is known (GET /version), e.g. in a pure test.
UNKNOWN_KUBELET_VERSION = "v0.0.0-runpod-reconciler"
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
READY_MESSAGE = "runpod-reconciler is posting ready status"
READY_WITHOUT_ENDPOINT_MESSAGE = (
    "runpod-reconciler is posting ready status; it serves no kubelet endpoint here "
    "(CronJob mode), so kubectl logs cannot reach its pods: use `reconciler logs`"
)


def kubelet_version(server_git_version: str) -> str:
    """The kubelet version the node reports: the cluster's own release, marked as ours.

    Version skew checks and tooling compare a node's kubelet with the control plane; a
    pinned string would claim an old or future kubelet as clusters are upgraded."""
    match = _VERSION.match(server_git_version.strip())
    if match is None:
        return UNKNOWN_KUBELET_VERSION
    return "v{}.{}.{}-runpod-reconciler".format(*match.groups())


def build_node(
    settings: Settings, now: datetime, version: str = UNKNOWN_KUBELET_VERSION
) -> KubeObject:
    """The Node as we register it, quantities in the API server's canonical form so the
    stored object reads back equal and an unchanged heartbeat writes nothing."""
    name = settings.node.name
    resources = {
        "nvidia.com/gpu": canonical_quantity(str(settings.node.gpus)),
        "pods": canonical_quantity(str(settings.node.pods)),
        "cpu": canonical_quantity(settings.node.cpu),
        "memory": canonical_quantity(settings.node.memory),
    }
    status: KubeObject = {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "conditions": _conditions(now, bool(settings.kubelet.port)),
        "addresses": _addresses(settings),
        "nodeInfo": {
            "kubeletVersion": version,
            "operatingSystem": "linux",
            "architecture": "amd64",
            "containerRuntimeVersion": "runpod://v2",
            "kernelVersion": "",
            "osImage": "RunPod",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kubeProxyVersion": "",
        },
    }
    # Always written, so that a port advertised before (by another mode) is taken back.
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": settings.kubelet.port}}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "type": "virtual-kubelet",
                "kubernetes.io/role": "agent",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "runpod",
            },
        },
        "spec": {"taints": [dict(PROVIDER_TAINT)]},
        "status": status,
    }


def _addresses(settings: Settings) -> list[dict[str, str]]:
    """The InternalIP where the reconciler's pod serves the kubelet endpoint, when it does.

    The API server reaches a kubelet at the first address by *type* in its
    --kubelet-preferred-address-types, Hostname first by default, whatever the order of
    the list: a Hostname address (the node's name resolves nowhere) would win over the
    InternalIP, so it is listed only when there is no IP to give. Without an endpoint
    (port 0: `sync --once`, whose pod is gone when its run ends) no IP is given: an
    address nothing listens on would make `kubectl logs` hang until it times out, where
    an unresolvable name fails at once."""
    if settings.kubelet.address and settings.kubelet.port:
        return [{"type": "InternalIP", "address": settings.kubelet.address}]
    return [{"type": "Hostname", "address": settings.node.name}]


def _conditions(now: datetime, serves_logs: bool) -> list[dict[str, str]]:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for kind, reason, message in pressure
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": READY_MESSAGE if serves_logs else READY_WITHOUT_ENDPOINT_MESSAGE,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    return conditions
