"""The virtual node as the reconciler registers it: a pure function of the settings."""

from __future__ import annotations

from datetime import datetime

from reconciler.core.config import Settings
from reconciler.core.domain import KubeObject

KUBELET_VERSION = "v1.30.0-runpod-reconciler"
PROVIDER_TAINT = {"key": "virtual-kubelet.io/provider", "value": "runpod", "effect": "NoSchedule"}


def build_node(settings: Settings, now: datetime, internal_ip: str | None = None) -> KubeObject:
    name = settings.node_name
    resources = {
        "nvidia.com/gpu": str(settings.node_gpus),
        "pods": str(settings.node_pods),
        "cpu": settings.node_cpu,
        "memory": settings.node_memory,
    }
    addresses = [{"type": "Hostname", "address": name}]
    if internal_ip:
        addresses.insert(0, {"type": "InternalIP", "address": internal_ip})
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
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": _conditions(now),
            "addresses": addresses,
            "nodeInfo": {
                "kubeletVersion": KUBELET_VERSION,
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
        },
    }


def _conditions(now: datetime) -> list[dict[str, str]]:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conditions = [
        {"type": kind, "status": "False", "reason": reason, "message": message,
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
        for kind, reason, message in pressure
    ]
    conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "message": "runpod-reconciler is posting ready status",
                       "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
    return conditions
