"""The simulated RunPod's Instant Cluster routes (the rules in `clusters`).

POST   /v2/clusters             create: 201; 400 no room in one data center, 402, 422
GET    /v2/clusters             every listed cluster (after the listing lag)
GET    /v2/clusters/{id}        one cluster; 404 unknown
PATCH  /v2/clusters/{id}        rename
DELETE /v2/clusters/{id}        204: the cluster and all its members end
GET    /v2/clusters/{id}/pods   its members
"""

from __future__ import annotations

from datetime import datetime

from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.clusters import (
    SimCluster,
    check_create_cluster,
    check_update_cluster,
    overlay_ip,
    role_of,
)
from reconciler.sim.runpod.faults import Faults
from reconciler.sim.runpod.http import Reply, Request, RouteTable
from reconciler.sim.runpod.pod_routes import PodRoutes
from reconciler.sim.runpod.pods import Membership
from reconciler.sim.runpod.validate import Problem, check_port

ROUTES = RouteTable()


class ClusterRoutes:
    def __init__(self, account: Account, faults: Faults, pods: PodRoutes) -> None:
        self._account = account
        self._faults = faults
        self._pods = pods
        self._ghosts: dict[str, SimCluster] = {}
        """Clusters a DELETE hid but left billing, until their id is deleted again."""

    def reset(self) -> None:
        self._ghosts.clear()

    @ROUTES("POST", "/v2/clusters")
    def _create_cluster(self, request: Request) -> Reply:
        body = request.body
        check_create_cluster(body)
        compute = body["compute"]
        gpu_id, per_pod, count = (
            compute["gpuTypeId"],
            compute["gpuCountPerPod"],
            compute["podCount"],
        )
        gpu = self._account.catalog.gpus.get(gpu_id)
        if gpu is None:
            raise Problem(400, f"no capacity: unknown GPU type {gpu_id}")
        if not gpu.offered("SECURE") or per_pod > gpu.max_for("SECURE"):
            raise Problem(400, f"{gpu_id} x {per_pod} per pod is not offered for clusters")
        for port in body.get("ports", []):
            check_port(port)
        self._account.check_payable(gpu.price_for("SECURE") * per_pod * count, None)
        wanted = body.get("dataCenterIds", [])
        unknown = sorted(set(wanted) - self._account.catalog.datacenters())
        if unknown:
            raise Problem(400, f"dataCenterIds: unknown data center {', '.join(unknown)}")
        # A network volume pins every member to its data center, as it pins a pod.
        wanted = self._account.volumes.placement(body) or wanted
        # One data center must hold the whole cluster.
        datacenter = self._account.catalog.take(gpu_id, per_pod * count, wanted, product="CLUSTER")
        if datacenter is None:
            where = ", ".join(wanted) or "any one data center"
            raise Problem(
                400, f"no capacity: could not place {count} x {per_pod} {gpu_id} in {where}"
            )
        cluster = SimCluster(
            id=self._account.new_id("cluster_", 10),
            name=body["name"],
            type=body["type"],
            compute=dict(compute),
            datacenter_id=datacenter,
            created_at=request.now,
            vxlan_id=len(self._account.clusters) + 100,
            listed_from=self._account.listed_from(request.now),
        )
        # Ranks run against creation order, so a client that pairs members by the order
        # it lists them in, rather than by rank, is caught.
        for index, rank in enumerate(reversed(range(count))):
            member = {
                key: body[key]
                for key in ("image", "args", "disk", "ports", "env", "mounts", "startSsh")
                if key in body
            }
            pod = self._pods.new_pod(
                {**member, "name": f"{cluster.name}-{index}"},
                gpu_id,
                per_pod,
                "SECURE",
                datacenter,
                request.now,
            )
            pod.membership = Membership(
                cluster.id,
                rank,
                overlay_ip(rank),
                role_of(cluster.type, rank),
            )
            pod.listed_from = cluster.listed_from
            self._account.ledgers[pod.id].cluster_id = cluster.id
            cluster.members.append(pod)
        self._account.just_created = cluster  # the request log's `created`, whatever the answer
        self._account.clusters[cluster.id] = cluster
        return self._faults.answer_created(Reply(201, cluster.to_json(request.now)))

    def _api_cluster(self, request: Request) -> SimCluster:
        cluster = self._account.clusters.get(request.id)
        if cluster is None:
            raise Problem(404, "cluster not found")
        return cluster

    @ROUTES("GET", "/v2/clusters")
    def _list_clusters(self, request: Request) -> Reply:
        now = request.now
        listed = [c.to_json(now) for c in self._account.clusters.values() if c.listed(now)]
        return Reply(200, {"clusters": listed})

    @ROUTES("GET", "/v2/clusters/{id}")
    def _get_cluster(self, request: Request) -> Reply:
        return Reply(200, self._api_cluster(request).to_json(request.now))

    @ROUTES("PATCH", "/v2/clusters/{id}")
    def _rename_cluster(self, request: Request) -> Reply:
        check_update_cluster(request.body)
        cluster = self._api_cluster(request)
        cluster.name = request.body["name"]
        return Reply(200, cluster.to_json(request.now))

    @ROUTES("DELETE", "/v2/clusters/{id}")
    def _delete_cluster(self, request: Request) -> Reply:
        ghost = self._ghosts.pop(request.id, None)
        if ghost is not None:  # a cluster whose earlier delete kept it billing
            for pod in ghost.members:
                self._end_bill(pod.id, request.now)
            return Reply(204)
        cluster = self._api_cluster(request)
        keeps_billing = self._faults.cluster_deletes.spend()
        for pod in cluster.members:
            if pod.id not in self._account.pods:
                continue  # it vanished (a host lost): its bill ended then
            self._pods.end_pod(pod, request.now)
            if not keeps_billing:
                self._end_bill(pod.id, request.now)
        del self._account.clusters[cluster.id]
        if keeps_billing:
            self._ghosts[cluster.id] = cluster
        return Reply(204)

    def _end_bill(self, pod_id: str, now: datetime) -> None:
        ledger = self._account.ledgers[pod_id]
        if ledger.deleted_at is None:
            ledger.delete(now)

    @ROUTES("GET", "/v2/clusters/{id}/pods")
    def _cluster_pods(self, request: Request) -> Reply:
        members = self._api_cluster(request).members
        return Reply(200, {"pods": [pod.to_json(request.now) for pod in members]})
