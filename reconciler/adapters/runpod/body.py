"""Domain values → RunPod v2 request bodies.

Optional fields are left out rather than sent as null: the create body is closed
(unknown or mistyped fields are a 422), and an absent field lets RunPod or the
template supply its default.
"""

from __future__ import annotations

from typing import Any

from reconciler.core.domain import ClusterRequest, CreateRequest


def create_pod_body(request: CreateRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"name": request.name}
    if request.cpu_flavor_id:
        # The contract: exactly one of gpu or cpu; a CPU pod's RAM follows its flavor.
        body["cpu"] = {"id": request.cpu_flavor_id, "vcpuCount": request.vcpu_count}
    else:
        body["gpu"] = {"id": request.gpu_type_id, "count": request.gpu_count}
        if request.allowed_cuda_versions:
            body["gpu"]["allowedCudaVersions"] = list(request.allowed_cuda_versions)
    body.update(cloud=request.cloud.value, env=dict(request.env))
    optional = {
        "image": request.image or None,
        "args": request.args,
        "ports": list(request.ports) or None,
        "disk": request.container_disk_gb,
        "dataCenterIds": list(request.datacenter_ids) or None,
        "templateId": request.template_id,
        "registry": request.registry_auth_id,
        "mounts": _mounts(request),
        "startSsh": True if request.start_ssh else None,
    }
    body.update({key: value for key, value in optional.items() if value is not None})
    return body


def _mounts(request: CreateRequest) -> dict[str, Any] | None:
    """Both kinds are passed on if both are set: RunPod's 400 then says what is wrong."""
    mounts: dict[str, Any] = {}
    if request.persistent_volume is not None:
        volume = request.persistent_volume
        mounts["persistent"] = {"size": volume.size_gb, "path": volume.path}
    if request.network_volume is not None:
        network = request.network_volume
        mounts["network"] = [{"volumeId": network.volume_id, "path": network.path}]
    return mounts or None


def create_cluster_body(request: ClusterRequest) -> dict[str, Any]:
    """`CreateClusterRequest`: a closed body, so only the fields it names."""
    member = request.member
    body: dict[str, Any] = {
        "name": request.name,
        "type": "TRAINING",
        "compute": {
            "gpuTypeId": request.gpu_type_id,
            "gpuCountPerPod": request.gpu_count_per_pod,
            "podCount": request.pod_count,
        },
        "image": member.image,
        "env": dict(member.env),
    }
    optional = {
        "args": member.args,
        "ports": list(member.ports) or None,
        "disk": member.container_disk_gb,
        "dataCenterIds": list(member.datacenter_ids) or None,
        "mounts": _mounts(member),
        "startSsh": True if member.start_ssh else None,
    }
    body.update({key: value for key, value in optional.items() if value is not None})
    return body
