"""The simulated RunPod's pod routes, and how a pod is made, booted and ended.

    GET    /v2/pods                 every listed pod (after the listing lag); cluster
                                    members only with `includeClusterPods=true`
    POST   /v2/pods                 create: 201 PROVISIONING; 400 rule/capacity/unknown
                                    data center, 402, 404 template/registry, 422
    GET    /v2/pods/{id}            one pod; a deleted one answers TERMINATED
    PATCH  /v2/pods/{id}            update; `env` replaces the whole env (PATCH semantics)
    DELETE /v2/pods/{id}            204; 404 for an unknown id
    POST   /v2/pods/{id}/action     start|stop|restart (200 + pod), terminate (204); 409

A cluster member is refused by PATCH, DELETE and the actions (409): only deleting its
cluster ends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.sim.runpod import billing
from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.catalog import cuda_key
from reconciler.sim.runpod.faults import Faults
from reconciler.sim.runpod.http import Reply, Request, RouteTable, bool_param
from reconciler.sim.runpod.pod_ssh import PodSsh
from reconciler.sim.runpod.pods import ACTIONS_BY_STATUS, SimPod
from reconciler.sim.runpod.validate import (
    Problem,
    check_create_pod,
    check_mount_change,
    check_pod_action,
    check_port,
    check_update_pod,
)

ROUTES = RouteTable()


@dataclass(frozen=True)
class HostCuda:
    """Which hosts' CUDA versions a create accepts: `gpu.allowedCudaVersions` matched
    exactly, or `gpu.minCudaVersion` compared as numbers; neither accepts any host."""

    allowed: frozenset[str] = frozenset()
    floor: str | None = None

    def __call__(self, version: str | None) -> bool:
        if self.allowed:
            return version in self.allowed
        if self.floor is not None:
            return version is not None and cuda_key(version) >= cuda_key(self.floor)
        return True

    @property
    def wanted(self) -> str:
        if self.allowed:
            return f" on a host with CUDA {', '.join(sorted(self.allowed, key=cuda_key))}"
        return "" if self.floor is None else f" on a host with CUDA {self.floor} or newer"


def host_cuda_rule(gpu: dict[str, Any]) -> HostCuda:
    return HostCuda(frozenset(gpu.get("allowedCudaVersions") or ()), gpu.get("minCudaVersion"))


class PodRoutes:
    def __init__(self, account: Account, faults: Faults, ssh: PodSsh) -> None:
        self._account = account
        self._faults = faults
        self._ssh = ssh

    def _standalone_pod(self, request: Request) -> SimPod:
        """The pod a change or delete route may act on: a cluster member is refused."""
        pod = self._account.served_pod(request.id)
        if pod.membership is not None:
            raise Problem(
                409,
                f"pod {pod.id} belongs to cluster {pod.membership.cluster_id}: manage it "
                "through /v2/clusters/{id}",
            )
        return pod

    @ROUTES("GET", "/v2/pods")
    def _list_pods(self, request: Request) -> Reply:
        now = request.now
        members = bool_param(request.params, "includeClusterPods")
        pods = [
            p.to_json(now)
            for p in self._account.pods.values()
            if p.listed(now) and (members or p.membership is None)
        ]
        return Reply(200, {"pods": pods})

    @ROUTES("GET", "/v2/pods/{id}")
    def _get_pod(self, request: Request) -> Reply:
        terminated = self._account.terminated.get(request.id)
        if terminated is not None and request.id not in self._account.pods:
            return Reply(200, terminated)
        return Reply(200, self._account.served_pod(request.id).to_json(request.now))

    @ROUTES("PATCH", "/v2/pods/{id}")
    def _update_pod(self, request: Request) -> Reply:
        check_update_pod(request.body)
        pod = self._standalone_pod(request)
        body = request.body
        if "templateId" in body:
            raise Problem(400, "templateId on update is not available in this simulator")
        if "mounts" in body:
            check_mount_change(pod.mounts, body["mounts"])
        registry = body.get("registry")
        if registry is not None and registry not in self._account.registries:
            raise Problem(400, f"registry credential {registry} not found")
        for port in body.get("ports", []):
            check_port(port)
        # PATCH semantics: a field present replaces the pod's value whole (env too).
        for name in ("name", "image", "args", "disk", "registry"):
            if name in body:
                setattr(pod, name, body[name])
        pod.mounts = {**pod.mounts, **body.get("mounts", {})}  # `{}` leaves them as they are
        if "env" in body:
            pod.env = dict(body["env"])
        if "ports" in body:
            pod.ports = list(body["ports"])
            pod.public_ports = {
                int(spec.split("/")[0]): pod.public_ports.get(int(spec.split("/")[0]))
                or self._account.public_port()
                for spec in pod.ports
            }
        return Reply(200, pod.to_json(request.now))

    @ROUTES("DELETE", "/v2/pods/{id}")
    def _delete_pod(self, request: Request) -> Reply:
        ledger = self._account.ledgers.get(request.id)
        if (
            request.id in self._account.terminated
            and ledger is not None
            and ledger.deleted_at is None
        ):
            ledger.delete(request.now)  # a pod whose earlier delete kept it billing
            return Reply(204)
        self.end_pod(self._standalone_pod(request), request.now)
        if not self._faults.pod_deletes.spend():
            self._account.ledgers[request.id].delete(request.now)
        return Reply(204)

    def end_pod(self, pod: SimPod, now: datetime) -> None:
        """The pod is gone from the list; its id still answers TERMINATED."""
        self._account.release(pod)
        terminated = pod.to_json(now)
        terminated.update(status="TERMINATED", cost=0.0, runtime=None, actions=[])
        self._account.terminated[pod.id] = terminated
        del self._account.pods[pod.id]
        self._ssh.stop(pod.id)
        self._account.log_written.notify_all()

    @ROUTES("POST", "/v2/pods")
    def _create_pod(self, request: Request) -> Reply:
        body = self._with_template(request.body)
        cloud = body.get("cloud", "SECURE")
        if "cpu" in body:
            gpu_id, count = body["cpu"]["id"], body["cpu"]["vcpuCount"]
            self._check_cpu_offer(gpu_id, count, cloud, body.get("registry"))
        else:
            gpu_id, count = body["gpu"]["id"], body["gpu"].get("count", 1)
            self._check_offer(gpu_id, count, cloud, body.get("registry"))
        unknown = sorted(set(body.get("dataCenterIds", [])) - self._account.catalog.datacenters())
        if unknown:
            # A deterministic rule, not capacity: it fails the same on every candidate.
            raise Problem(400, f"dataCenterIds: unknown data center {', '.join(unknown)}")
        allowed = self._account.volumes.placement(body) or body.get("dataCenterIds", [])
        cuda = host_cuda_rule(body.get("gpu", {}))
        datacenter = self._account.catalog.take(gpu_id, count, allowed, cuda)
        if datacenter is None:
            # RunPod matches CUDA versions exactly and falls back to none: a set no host
            # meets is a capacity error, the same 400 as a full data center.
            wanted = ", ".join(allowed) or "any data center"
            raise Problem(
                400,
                f"no capacity: could not place {count} x {gpu_id} in {wanted}{cuda.wanted}",
            )
        pod = self.new_pod(body, gpu_id, count, cloud, datacenter, request.now)
        return self._created(pod, request.now)

    def _with_template(self, body: Any) -> dict[str, Any]:
        check_create_pod(body)
        if "templateId" not in body:
            return dict(body)
        template = self._account.templates.get(body["templateId"])
        if template is None:
            raise Problem(404, f"template {body['templateId']} not found")
        merged = {**template, **body}
        merged["env"] = {**template.get("env", {}), **body.get("env", {})}
        for port in merged.get("ports", []):
            check_port(port)
        return merged

    def _check_offer(self, gpu_id: str, count: int, cloud: str, registry: str | None) -> None:
        gpu = self._account.catalog.gpus.get(gpu_id)
        if gpu is None:
            raise Problem(400, f"no capacity: unknown GPU type {gpu_id}")
        if not gpu.offered(cloud) or count > gpu.max_for(cloud):
            raise Problem(400, f"{gpu_id} x {count} is not offered on {cloud} cloud")
        self._account.check_payable(gpu.price_for(cloud) * count, registry)

    def _check_cpu_offer(
        self, flavor_id: str, vcpus: int, cloud: str, registry: str | None
    ) -> None:
        """The contract: a flavor from the CPU catalog, vcpuCount a power of two valid for
        it. The catalog prices CPU pods for the secure cloud only."""
        flavor = self._account.catalog.cpus.get(flavor_id)
        if flavor is None:
            raise Problem(400, f"cpu.id: unknown CPU flavor {flavor_id}")
        low, high = flavor["vcpu"]["min"], flavor["vcpu"]["max"]
        if vcpus & (vcpus - 1) or not low <= vcpus <= high:
            raise Problem(
                400, f"cpu.vcpuCount {vcpus}: must be a power of two from {low} to {high}"
            )
        if cloud != "SECURE":
            raise Problem(400, f"CPU pods are not offered on {cloud} cloud")
        self._account.check_payable(flavor["price"]["securePerVcpu"] * vcpus, registry)

    def _created(self, pod: SimPod, now: datetime) -> Reply:
        return self._faults.answer_created(Reply(201, pod.to_json(now)))

    def new_pod(
        self,
        body: dict[str, Any],
        gpu_id: str,
        count: int,
        cloud: str,
        datacenter: str,
        now: datetime,
    ) -> SimPod:
        cpu = self._account.catalog.cpus.get(gpu_id) if "cpu" in body else None
        unit_price = (
            cpu["price"]["securePerVcpu"]
            if cpu
            else self._account.catalog.gpus[gpu_id].price_for(cloud)
        )
        ports = list(body.get("ports", []))
        pod = SimPod(
            id=self._account.new_id(),
            name=body["name"],
            image=body.get("image", ""),
            gpu_id=gpu_id,
            gpu_count=count,
            cloud=cloud,
            datacenter_id=datacenter,
            price_per_gpu=unit_price,
            created_at=now,
            starting_at=now,
            running_at=now,
            public_ip=self._account.public_ip(),
            public_ports={int(spec.split("/")[0]): self._account.public_port() for spec in ports},
            args=body.get("args", ""),
            disk=body.get("disk", 20),
            ports=ports,
            env=dict(body.get("env", {})),
            registry=body.get("registry"),
            mounts=body.get("mounts", {}),
            listed_from=self._account.listed_from(now),
            # RunPod derives a CPU pod's RAM from its flavor, in whole GB.
            cpu_memory_gb=int(cpu["ramGbPerVcpu"] * count) if cpu else None,
            start_ssh=bool(body.get("startSsh", False)),
            cuda_version=None if cpu else self._account.catalog.cuda_at(gpu_id, datacenter),
        )
        self._ssh.start(pod)
        self._boot_pod(pod, now, provisioning=self._account.boot[0])
        self._account.pods[pod.id] = pod
        self._account.just_created = pod
        ledger = billing.PodLedger(
            pod.id,
            pod.price_per_gpu * count,
            billing.DISK_USD_PER_GB_HOUR * pod.disk,
            now,
            cpu=cpu is not None,
        )
        ledger.gpu_on(now)
        self._account.ledgers[pod.id] = ledger
        return pod

    def _boot_pod(self, pod: SimPod, now: datetime, provisioning: timedelta) -> None:
        pull = timedelta(seconds=self._account.pull_seconds.get(pod.image, 0.0))
        starting_at = now + provisioning
        failure = self._account.start_failure(pod)
        pod.schedule_boot(starting_at, starting_at + self._account.boot[1] + pull, failure)

    @ROUTES("POST", "/v2/pods/{id}/action")
    def _pod_action(self, request: Request) -> Reply:
        action = check_pod_action(request.body)
        pod = self._standalone_pod(request)
        status = pod.status(request.now)
        if action not in ACTIONS_BY_STATUS[status]:
            raise Problem(409, f"cannot {action} a pod that is {status}")
        if action == "terminate":
            return self._delete_pod(request)
        getattr(self, f"_{action}_pod")(pod, request.now)
        return Reply(200, pod.to_json(request.now))

    def _stop_pod(self, pod: SimPod, now: datetime) -> None:
        pod.stop(now)
        self._account.release(pod)  # a stopped pod keeps its disk but not its GPUs
        self._account.ledgers[pod.id].gpu_off(now)

    def _start_pod(self, pod: SimPod, now: datetime) -> None:
        if not pod.holds_capacity:
            if self._account.catalog.take(pod.gpu_id, pod.gpu_count, [pod.datacenter_id]) is None:
                raise Problem(400, f"no capacity: {pod.gpu_id} is not free on the pod's host")
            pod.holds_capacity = True
        self._boot_pod(pod, now, provisioning=timedelta())
        self._account.ledgers[pod.id].gpu_on(now)

    def _restart_pod(self, pod: SimPod, now: datetime) -> None:
        pod.restart(now, "container restarted on request")
