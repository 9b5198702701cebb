"""Instant Clusters in the simulated RunPod: the create body's checks and a cluster as served.

The contract (`Cluster`, `CreateClusterRequest`, `ClusterCompute`, `PodCluster`):

- `compute` is one homogeneous shape, `podCount` (2 to 250) pods of `gpuCountPerPod` GPUs
  of `gpuTypeId`; the body is closed (`unevaluatedProperties: false`): there is no
  `registry` (private registries are not supported for clusters), no `cloud`, no
  `templateId`, no per-pod field. A shape or type violation is 422.
- The whole cluster is placed in one data center (400 when none has room for all of it).
- A member's `cluster.rank` is null until provisioning assigns it, and so is its overlay
  `ip`; rank 0 is `Cluster.primary`. Ranks are given against creation order here (the
  last member made is rank 0), so a client that assumes creation order is caught.
- Members are left out of `GET /v2/pods` unless `includeClusterPods=true`, and the pod
  routes refuse to change or delete them (409): `DELETE /v2/clusters/{id}` ends them all.
- `mounts` is the contract's `Mounts`, as on a pod: one persistent or one network mount
  (both: 400) for every member; a network volume must exist and pins the whole cluster
  to its data center (400 when `dataCenterIds` excludes it or it has no room there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.sim.runpod.listing import Listing
from reconciler.sim.runpod.pods import SimPod, iso
from reconciler.sim.runpod.validate import (
    Problem,
    boolean,
    closed_object,
    enum,
    integer,
    mounts,
    string,
    string_array,
    string_map,
    validate,
)

CLUSTER_TYPES = ("APPLICATION", "TRAINING", "SLURM", "RAY")
MIN_PODS, MAX_PODS = 2, 250
OVERLAY_CIDR = "10.65.0.0/16"
VXLAN_PORT = 4789
_ROLES = {"SLURM": ("SLURM_CONTROLLER", "SLURM_COMPUTE"), "RAY": ("RAY_HEAD", "RAY_WORKER")}

_COMPUTE = closed_object(
    {
        "gpuTypeId": string(1),
        "gpuCountPerPod": integer(1),
        "podCount": integer(MIN_PODS, MAX_PODS),
    },
    required=("gpuTypeId", "gpuCountPerPod", "podCount"),
)
_CREATE_CLUSTER = closed_object(
    {
        "name": string(1),
        "type": enum(*CLUSTER_TYPES),
        "compute": _COMPUTE,
        "image": string(),
        "args": string(),
        "disk": integer(1),
        "env": string_map,
        "ports": string_array,
        "dataCenterIds": string_array,
        "mounts": mounts,
        "startJupyter": boolean,
        "startSsh": boolean,
    },
    required=("name", "type", "compute"),
)
_UPDATE_CLUSTER = closed_object({"name": string(1)})


def check_create_cluster(body: Any) -> None:
    validate(_CREATE_CLUSTER, body)
    if not body.get("image"):
        # Every member runs the same container: without a template to spread, the
        # body must name its image.
        raise Problem(400, "image is required: a cluster's pods need a container image")
    given = body.get("mounts", {})
    if "persistent" in given and "network" in given:
        raise Problem(400, "mounts.persistent and mounts.network are mutually exclusive")


def check_update_cluster(body: Any) -> None:
    validate(_UPDATE_CLUSTER, body)
    if not body:
        raise Problem(422, "Request validation failed.", errors=["$: at least 1 property"])


@dataclass
class SimCluster(Listing):
    id: str
    name: str
    type: str
    compute: dict[str, Any]
    datacenter_id: str
    created_at: datetime
    vxlan_id: int
    members: list[SimPod] = field(default_factory=list)
    listed_from: datetime | None = None

    def to_json(self, now: datetime) -> dict[str, Any]:
        by_status: dict[str, int] = {}
        for pod in self.members:
            status = pod.status(now)
            by_status[status] = by_status.get(status, 0) + 1
        body: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "compute": dict(self.compute),
            "dataCenterId": self.datacenter_id,
            "pods": {"total": len(self.members), "byStatus": by_status},
            "network": {"cidr": OVERLAY_CIDR, "vxlanId": self.vxlan_id, "vxlanPort": VXLAN_PORT},
            "createdAt": iso(self.created_at),
        }
        primary = next(
            (p for p in self.members if (p.cluster_block(now) or {}).get("rank") == 0), None
        )
        if primary is not None:
            body["primary"] = _primary(primary, now)
        return body


def role_of(cluster_type: str, rank: int) -> str | None:
    roles = _ROLES.get(cluster_type)
    if roles is None:
        return None
    return roles[0] if rank == 0 else roles[1]


def overlay_ip(rank: int) -> str:
    return f"10.65.{(rank + 2) // 256}.{(rank + 2) % 256}"


def _primary(pod: SimPod, now: datetime) -> dict[str, Any]:
    primary: dict[str, Any] = {"podId": pod.id, "status": pod.status(now)}
    direct = pod.to_json(now)["ssh"]["direct"]
    if direct is not None:
        primary["sshEndpoint"] = f"{direct['host']}:{direct['port']}"
    return primary
