"""The simulated RunPod's test controls over HTTP, under `/_sim/` (the list in
`runpod`'s docstring): each calls the in-process control of the same name.

They need no key, spend no quota and are not logged; a body that is not JSON, or that
names an unknown pod, is a problem answer (400, 404), never a crash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Protocol

from reconciler.sim.clock import SimClock
from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.faults import Faults
from reconciler.sim.runpod.http import Reply, Request, RouteTable, SimRequest
from reconciler.sim.runpod.log_routes import LogRoutes
from reconciler.sim.runpod.pod_ssh import PodSsh
from reconciler.sim.runpod.pods import iso
from reconciler.sim.runpod.volumes import SimVolume

ROUTES = RouteTable()


class Controls(Protocol):
    """What the admin routes reach of the simulator (`RunPodSimulator`)."""

    clock: SimClock
    account: Account
    faults: Faults
    logs: LogRoutes
    ssh: PodSsh

    @property
    def requests(self) -> list[SimRequest]: ...

    def reset(self) -> None: ...

    def advance(self, seconds: float) -> None: ...

    def add_instance(
        self,
        name: str,
        *,
        image: str = ...,
        gpu_type_id: str | None = ...,
        gpu_count: int = ...,
        cloud: str = ...,
        datacenter_id: str | None = ...,
        env: Mapping[str, str] | None = ...,
        ports: Sequence[str] = ...,
        running: bool = ...,
    ) -> str: ...

    def exit_process(self, instance_id: str, code: int) -> None: ...

    def stick_runtime_null(self, instance_id: str) -> None: ...

    def fail_instance(self, instance_id: str) -> None: ...

    def set_instance_fields(self, instance_id: str, fields: Mapping[str, Any]) -> None: ...

    def vanish(self, instance_id: str) -> None: ...

    def billed(self, instance_id: str) -> dict[str, float]: ...

    def add_volume(self, name: str, size: int, datacenter: str, kind: str = ...) -> SimVolume: ...


class AdminRoutes:
    def __init__(self, sim: Controls) -> None:
        self._sim = sim

    @ROUTES("POST", "/_sim/clock/advance")
    def _admin_advance(self, request: Request) -> Reply:
        self._sim.advance(float(request.body["seconds"]))
        return Reply(200, {"now": iso(self._sim.clock.now())})

    @ROUTES("POST", "/_sim/pods")
    def _admin_add_pod(self, request: Request) -> Reply:
        body = dict(request.body)
        settings = {
            "image": body.get("image", "ubuntu:22.04"),
            "gpu_type_id": body.get("gpuTypeId"),
            "gpu_count": int(body.get("gpuCount", 1)),
            "cloud": body.get("cloud", "SECURE"),
            "datacenter_id": body.get("dataCenterId"),
            "env": body.get("env"),
            "ports": body.get("ports", ()),
        }
        return Reply(201, {"id": self._sim.add_instance(body["name"], **settings)})

    @ROUTES("POST", "/_sim/pods/{id}/exit")
    def _admin_exit(self, request: Request) -> Reply:
        self._sim.exit_process(request.id, int(request.body["code"]))
        return Reply(204)

    @ROUTES("POST", "/_sim/pods/{id}/stick-runtime-null")
    def _admin_stick(self, request: Request) -> Reply:
        self._sim.stick_runtime_null(request.id)
        return Reply(204)

    @ROUTES("POST", "/_sim/pods/{id}/fail")
    def _admin_fail(self, request: Request) -> Reply:
        self._sim.fail_instance(request.id)
        return Reply(204)

    @ROUTES("POST", "/_sim/pods/{id}/logs")
    def _admin_logs(self, request: Request) -> Reply:
        lines = request.body.get("lines") if isinstance(request.body, dict) else None
        if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
            raise ValueError('the body must be {"lines": ["...", ...]}')
        self._sim.logs.write_container(request.id, lines)
        return Reply(204)

    @ROUTES("POST", "/_sim/pods/{id}/logs/drop")
    def _admin_drop_logs(self, request: Request) -> Reply:
        body = request.body or {}
        marked = self._sim.logs.drop_streams(
            request.id, int(body.get("after", 0)), next_one=bool(body.get("next", False))
        )
        return Reply(200, {"streams": marked})

    @ROUTES("POST", "/_sim/pods/{id}/logs/slow")
    def _admin_slow_logs(self, request: Request) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        self._sim.logs.slow_backfill(request.id, float(body.get("seconds", 0)))
        return Reply(204)

    @ROUTES("POST", "/_sim/pods/{id}/fields")
    def _admin_fields(self, request: Request) -> Reply:
        self._sim.set_instance_fields(request.id, dict(request.body))
        return Reply(204)

    @ROUTES("POST", "/_sim/pods/{id}/sshd")
    def _admin_sshd(self, request: Request) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        if not isinstance(body.get("running"), bool):
            raise ValueError('the body must be {"running": true|false}')
        self._sim.ssh.set_running(
            request.id, body["running"], new_host_key=bool(body.get("newHostKey"))
        )
        return Reply(204)

    @ROUTES("POST", "/_sim/pods/{id}/serve")
    def _admin_serve(self, request: Request) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        if not isinstance(body.get("port"), int) or not isinstance(body.get("body"), str):
            raise ValueError('the body must be {"port": 8888, "body": "..."}')
        self._sim.ssh.serve_http(request.id, body["port"], body["body"])
        return Reply(204)

    @ROUTES("DELETE", "/_sim/pods/{id}")
    def _admin_vanish(self, request: Request) -> Reply:
        self._sim.vanish(request.id)
        return Reply(204)

    @ROUTES("POST", "/_sim/faults")
    def _admin_fault(self, request: Request) -> Reply:
        body = request.body
        kind, count = body.get("kind", "status"), int(body.get("count", 1))
        if kind == "create-then-fail":
            self._sim.faults.create_then_fail(count, int(body.get("status", 500)))
        elif kind == "create-then-hang":
            self._sim.faults.create_then_hang(count, float(body.get("seconds", 2.0)))
        elif kind == "delete-keeps-billing":
            self._sim.faults.delete_keeps_billing(count)
        elif kind == "volume-delete-keeps-billing":
            self._sim.faults.volume_delete_keeps_billing(count)
        elif kind == "status":
            retry_after = int(body.get("retryAfter", 5))
            fault = (body["method"], body["path"], int(body["status"]), count)
            self._sim.faults.inject(*fault, retry_after=retry_after)
        else:
            raise ValueError(f"unknown fault kind {kind!r}")
        return Reply(204)

    @ROUTES("POST", "/_sim/capacity")
    def _admin_capacity(self, request: Request) -> Reply:
        body = request.body
        self._sim.account.set_capacity(
            body["gpuTypeId"],
            body["dataCenterId"],
            int(body["count"]),
            str(body.get("product", "POD")),
        )
        return Reply(204)

    @ROUTES("POST", "/_sim/balance")
    def _admin_balance(self, request: Request) -> Reply:
        dollars = request.body.get("dollars")
        self._sim.account.set_balance(None if dollars is None else float(dollars))
        return Reply(204)

    @ROUTES("POST", "/_sim/listing-lag")
    def _admin_listing_lag(self, request: Request) -> Reply:
        self._sim.account.set_listing_lag(float(request.body["seconds"]))
        return Reply(204)

    @ROUTES("POST", "/_sim/listing-lag/catch-up")
    def _admin_listing_catch_up(self, request: Request) -> Reply:
        self._sim.account.catch_up_listing()
        return Reply(204)

    @ROUTES("POST", "/_sim/image-pull")
    def _admin_image_pull(self, request: Request) -> Reply:
        self._sim.account.set_image_pull_seconds(
            request.body["image"], float(request.body["seconds"])
        )
        return Reply(204)

    @ROUTES("POST", "/_sim/image-cuda")
    def _admin_image_cuda(self, request: Request) -> Reply:
        self._sim.account.set_image_cuda(request.body["image"], str(request.body["version"]))
        return Reply(204)

    @ROUTES("POST", "/_sim/host-cuda")
    def _admin_host_cuda(self, request: Request) -> Reply:
        body = request.body
        self._sim.account.set_host_cuda(
            body["gpuTypeId"], body["dataCenterId"], str(body["version"])
        )
        return Reply(204)

    @ROUTES("POST", "/_sim/image-unpullable")
    def _admin_image_unpullable(self, request: Request) -> Reply:
        body = request.body
        self._sim.account.set_image_unpullable(body["image"], bool(body.get("unauthorized")))
        return Reply(204)

    @ROUTES("POST", "/_sim/host-fault")
    def _admin_host_fault(self, request: Request) -> Reply:
        body = request.body
        self._sim.account.set_host_fault(body["gpuTypeId"], body["dataCenterId"], body["fault"])
        return Reply(204)

    @ROUTES("POST", "/_sim/templates")
    def _admin_template(self, request: Request) -> Reply:
        settings = dict(request.body)
        self._sim.account.add_template(settings.pop("id"), **settings)
        return Reply(204)

    @ROUTES("GET", "/_sim/requests")
    def _admin_requests(self, request: Request) -> Reply:
        return Reply(200, [asdict(entry) for entry in self._sim.requests])

    @ROUTES("GET", "/_sim/billing/{id}")
    def _admin_billed(self, request: Request) -> Reply:
        return Reply(200, self._sim.billed(request.id))

    @ROUTES("GET", "/_sim/state")
    def _admin_state(self, request: Request) -> Reply:
        pods = [pod.to_json(request.now) for pod in self._sim.account.pods.values()]
        volumes = [volume.to_json() for volume in self._sim.account.volumes.live.values()]
        made = [cluster.to_json(request.now) for cluster in self._sim.account.clusters.values()]
        state = {"now": iso(request.now), "balance": self._sim.account.balance, "pods": pods}
        return Reply(200, {**state, "networkVolumes": volumes, "clusters": made})

    @ROUTES("POST", "/_sim/network-volumes")
    def _admin_add_volume(self, request: Request) -> Reply:
        body = request.body
        volume = self._sim.add_volume(
            body["name"], int(body["size"]), body["dataCenter"], body.get("type", "STANDARD")
        )
        return Reply(201, volume.to_json())

    @ROUTES("POST", "/_sim/reset")
    def _admin_reset(self, request: Request) -> Reply:
        self._sim.reset()
        return Reply(204)
