"""A loopback RunPod REST v2 server for tests, benchmarks and the demo.

It serves what the reconciler uses, with the contract's status codes and
`application/problem+json` errors:

    GET    /v2/pods                 every listed pod (after the listing lag)
    POST   /v2/pods                 create: 201 PROVISIONING; 400 rule/capacity/unknown
                                    data center (or no host of an allowed CUDA
                                    version), 402, 404 template/registry, 422
    GET    /v2/pods/{id}            one pod (404 once deleted)
    DELETE /v2/pods/{id}            204; 404 for an unknown id
    POST   /v2/pods/{id}/action     start|stop|restart (200 + pod), terminate (204); 409
    GET    /v2/pods/{id}/logs       SSE (`source`, `tail`, `since`, `Last-Event-ID`): open
                                    while the pod runs (see `logs`)
    GET    /v2/catalog/gpus         `include=AVAILABILITY&product=POD|CLUSTER`, `count`, `cloud`;
                                    `cudaVersions` per type (its hosts' CUDA versions)
    GET    /v2/catalog/cpus         `include=AVAILABILITY&product=POD`
    PATCH  /v2/pods/{id}            update; `env` replaces the whole env (PATCH semantics)
    GET    /v2/registries, POST /v2/registries   (the password is never echoed)
    GET    /v2/registries/{id}, DELETE /v2/registries/{id}   (400 while a pod uses it)
    GET    /v2/billing/pods, GET /v2/billing     from each pod's ledger (see billing)
    /v2/network-volumes, /v2/billing/network-volumes   see volumes; a pod's
                                    network mount pins it to the volume's data center
    POST   /v2/clusters             create an Instant Cluster: 201; 400 no room in one data
                                    center, 402, 422 (see clusters)
    GET    /v2/clusters, GET|PATCH|DELETE /v2/clusters/{id}, GET /v2/clusters/{id}/pods
    GET    /v2/billing/clusters     one record per cluster per bucket

Each resource's routes are a module of their own (`pod_routes`,
`log_routes`, `catalog_routes`, `registry_routes`,
`cluster_routes`, `billing_routes`, `volume_routes`, and the test
controls' `admin_routes`) over one shared `account.Account`; what every
request passes first (User-Agent, key, quota, faults, the request log) is
`gateway`, the wire `http`.

Cluster members are pods: `GET /v2/pods` leaves them out unless `includeClusterPods=true`,
`GET /v2/pods/{id}` and its logs serve them, and PATCH, DELETE and actions on them are
refused with 409 (only deleting their cluster ends them).

A deleted pod leaves the list at once, but `GET /v2/pods/{id}` keeps serving it with
status TERMINATED (cost 0, no runtime, no actions), as the contract's status says.
RunPod's gateway refuses urllib's default User-Agent (`Python-urllib/*`) with 403 and
error code 1010; the simulator does the same. Every API request's headers are recorded
(Authorization masked) so tests can check what a client sent.

Pods live on a `SimClock`: PROVISIONING for `provisioning_seconds`, STARTING for
`starting_seconds` plus the image's pull time (`account.set_image_pull_seconds`), then RUNNING
with a runtime (public IP and port per `tcp` port; `http` ports go through RunPod's
proxy and carry no public address). Time moves only through `advance()` (or a client
whose `sleep` is the clock's), and every answer's `Date` header is read from it.
Every authenticated answer carries `RateLimit` and `RateLimit-Policy`; a spent window
answers 429 with `Retry-After`.

Test controls, in process and over HTTP under `/_sim/` (no key needed, not rate
limited, not in the request log). In process, the pod controls are the simulator's own
methods (`add_instance`, `exit_process`, `set_instance_fields`, ...); the rest are grouped
by concern: `sim.account` (capacity, balance, listing lag, templates, image pulls),
`sim.faults`, `sim.logs`, `sim.ssh`. Over HTTP, bodies are JSON:

    POST   /_sim/clock/advance               {"seconds": 30}
    POST   /_sim/pods                        {"name", "image", "gpuTypeId", "env", ...} -> {"id"}
    POST   /_sim/pods/{id}/exit              {"code": 3}
    POST   /_sim/pods/{id}/stick-runtime-null
    POST   /_sim/pods/{id}/fail              the pod turns ERROR
    POST   /_sim/pods/{id}/logs              {"lines": ["..."]}: the container prints them now
    POST   /_sim/pods/{id}/logs/drop         {"after": 2, "next": false}: cut the pod's open
                                              log streams (or, with next, the next one
                                              opened) after that many more events
    POST   /_sim/pods/{id}/logs/slow         {"seconds": 1.5}: the pod's streams opened from
                                              now on send their backfill one event at a
                                              time, that many real seconds before each
    POST   /_sim/pods/{id}/fields            {raw pod fields served as given, e.g. "status";
                                              a non-empty "runtime" object is laid over the
                                              live runtime while the pod runs, e.g.
                                              {"runtime": {"cpu": {"util": 50}}}}
    POST   /_sim/pods/{id}/sshd              {"running": false}: the pod's sshd stops (an
                                              image that runs none); {"running": true,
                                              "newHostKey": true}: back with a new host key
    POST   /_sim/pods/{id}/serve             {"port": 8888, "body": "..."}: the pod answers
                                              HTTP GET on that loopback port (reached by
                                              SSH forwarding)
    DELETE /_sim/pods/{id}                   vanish without any API call
    POST   /_sim/faults                      {"method", "path" (glob), "status", "count",
                                              "retryAfter"}; or {"kind": "create-then-fail",
                                              "status", "count"}; or {"kind":
                                              "create-then-hang", "seconds", "count"}; or
                                              {"kind": "delete-keeps-billing", "count"};
                                              or {"kind": "volume-delete-keeps-billing",
                                              "count"}
    POST   /_sim/capacity                    {"gpuTypeId", "dataCenterId", "count", "product"?}
    POST   /_sim/balance                     {"dollars": 12.5 or null}
    POST   /_sim/listing-lag                 {"seconds": 20}: pods, clusters and network
                                              volumes made from now on are listed that
                                              much later (`listing`)
    POST   /_sim/listing-lag/catch-up        everything listed now, as once its lag passed
    POST   /_sim/image-pull                  {"image", "seconds"}
    POST   /_sim/image-cuda                  {"image", "version"}: the image requires a
                                              host of that CUDA version or newer; on an
                                              older one its start fails (nvidia-container-
                                              cli's line) and the pod stays STARTING, billing
    POST   /_sim/host-cuda                   {"gpuTypeId", "dataCenterId", "version"}
    POST   /_sim/image-unpullable            {"image", "unauthorized": false}: no host can
                                              pull it (RunPod's system line says why);
                                              its pods stay STARTING, billing
    POST   /_sim/host-fault                  {"gpuTypeId", "dataCenterId", "fault": "gpu" |
                                              "stuck" | null}: those hosts fail every start
                                              (a GPU the driver cannot initialise, or a
                                              start that never ends), or are mended
    POST   /_sim/templates                   {"id", "image", "env", "ports", "disk", "args"}
    GET    /_sim/requests                    [{"method", "path", "query", "status", "body",
                                              "headers", "at", "created", "listed_from"}]
    GET    /_sim/billing/{id}                {"gpu", "disk", "total"}: the pod's whole ledger
    GET    /_sim/state                       {"now", "balance", "pods": every pod as served}
    POST   /_sim/network-volumes             {"name", "size", "dataCenter", "type"} -> the
                                              volume (made without the API, as in the console)
    POST   /_sim/reset

`instances` gives every pod (foreign and not yet listed ones too) as the JSON the API
would serve now, keyed by id; `requests` the logged API requests (passwords masked).

A pod created with `startSsh` and a `PUBLIC_KEY` in its env runs a real sshd on
127.0.0.1 (see `ssh`: commands run with `sh` in a per-pod sandbox directory that
stands for the pod's filesystem); its `22/tcp` mapping, when published, is the sshd's
port, so `ssh.direct` leads to it once the pod runs. Each pod's public IP is its own
address in 203.0.113.0/24 (as a real pod shows its machine's), which this machine does
not route: clients reach it through `net.PROXY_COMMAND` (their SSH ProxyCommand).
`ssh.sandbox(id)` and `ssh.host_key(id)` let tests look inside.

Run as a process: `python -m reconciler.sim.runpod --port 8080 --api-key KEY` prints its
base URL as the first line of stdout and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.sim.clock import SimClock, real_start
from reconciler.sim.runpod import (
    admin_routes,
    billing_routes,
    catalog_routes,
    cluster_routes,
    log_routes,
    pod_routes,
    registry_routes,
    volume_routes,
)
from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.catalog import DEFAULT_GPU_TYPES
from reconciler.sim.runpod.faults import Faults
from reconciler.sim.runpod.gateway import Gateway
from reconciler.sim.runpod.http import Router, Server, SimRequest
from reconciler.sim.runpod.pod_ssh import PodSsh
from reconciler.sim.runpod.volumes import SimVolume


class RunPodSimulator:
    """The simulated RunPod: its account, its pods as tests seed and disturb them, and
    the controls by concern: `account` (capacity, balance, listing lag, templates, image
    pulls), `faults`, `logs`, `ssh`."""

    def __init__(
        self,
        api_key: str = "sim-key",
        *,
        clock: SimClock | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        gpu_types: list[dict[str, Any]] | None = None,
        quota: tuple[int, int, int] = (60, 3000, 50000),
        provisioning_seconds: float = 5,
        starting_seconds: float = 10,
    ) -> None:
        self.clock = clock or SimClock()
        self._address = (host, port)
        boot = (timedelta(seconds=provisioning_seconds), timedelta(seconds=starting_seconds))
        gpus = gpu_types if gpu_types is not None else DEFAULT_GPU_TYPES
        self.account = Account(self.clock, gpus, boot)
        self.faults = Faults(self.account.lock)
        self.ssh = PodSsh(self.account)
        self.logs = log_routes.LogRoutes(self.account)
        self._pod_routes = pod_routes.PodRoutes(self.account, self.faults, self.ssh)
        self._cluster_routes = cluster_routes.ClusterRoutes(
            self.account, self.faults, self._pod_routes
        )
        api = Router(
            [
                (pod_routes.ROUTES, self._pod_routes),
                (log_routes.ROUTES, self.logs),
                (catalog_routes.ROUTES, catalog_routes.CatalogRoutes(self.account)),
                (registry_routes.ROUTES, registry_routes.RegistryRoutes(self.account)),
                (cluster_routes.ROUTES, self._cluster_routes),
                (billing_routes.ROUTES, billing_routes.BillingRoutes(self.account)),
                (volume_routes.ROUTES, volume_routes.VolumeRoutes(self.account, self.faults)),
            ]
        )
        admin = Router([(admin_routes.ROUTES, admin_routes.AdminRoutes(self))])
        self._gateway = Gateway(
            self.account, self.faults, self.logs, (api, admin), api_key=api_key, quota=quota
        )
        self._server: Server | None = None

    def __repr__(self) -> str:
        return f"RunPodSimulator(base_url={self.base_url!r})"

    # Lifecycle

    def start(self) -> RunPodSimulator:
        self.account.stopping.clear()
        self._server = Server(self._address, self._gateway)
        # A short poll interval makes stop() quick, which many short tests feel.
        serve = partial(self._server.serve_forever, poll_interval=0.05)
        threading.Thread(target=serve, name="runpod-sim", daemon=True).start()
        return self

    def stop(self) -> None:
        self.account.stopping.set()  # releases hanging creates
        self.ssh.close()
        self.account.volumes.close()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> RunPodSimulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            return f"http://{self._address[0]}:{self._address[1]}"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reset(self) -> None:
        """Forget pods, registries, faults, quota use and the log; the clock keeps its time."""
        with self.account.lock:
            self.ssh.close()
            self.account.reset()
            self.faults.reset()
            self.logs.reset()
            self._cluster_routes.reset()
            self._gateway.reset()

    # Views for tests

    @property
    def instances(self) -> dict[str, dict[str, Any]]:
        with self.account.lock:
            now = self.clock.now()
            return {pod.id: pod.to_json(now) for pod in self.account.pods.values()}

    @property
    def clusters(self) -> dict[str, dict[str, Any]]:
        """Every cluster (unlisted ones too) as the API would serve it now, keyed by id."""
        with self.account.lock:
            now = self.clock.now()
            return {c.id: c.to_json(now) for c in self.account.clusters.values()}

    @property
    def volumes(self) -> dict[str, dict[str, Any]]:
        """Every live network volume as the API serves it, keyed by id."""
        with self.account.lock:
            return {v.id: v.to_json() for v in self.account.volumes.live.values()}

    def add_volume(
        self, name: str, size: int, datacenter: str, kind: str = "STANDARD"
    ) -> SimVolume:
        """A volume made without the API (someone's console): no quota, no request log."""
        with self.account.lock:
            return self.account.volumes.add(name, size, datacenter, self.clock.now(), kind)

    def volume_directory(self, volume_id: str) -> Path:
        """The directory that holds the volume's data."""
        with self.account.lock:
            return self.account.volumes.get(volume_id).directory

    @property
    def requests(self) -> list[SimRequest]:
        with self.account.lock:
            return list(self._gateway.log)

    # The account's pods, as tests seed and disturb them

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def exit_process(self, instance_id: str, code: int) -> None:
        """The pod's main process ends with `code` (see `SimPod.exit_process`)."""
        with self.account.lock:
            pod = self.account.pod(instance_id)
            pod.exit_process(self.clock.now(), code)
            if pod.stopped_at is not None:
                self.account.release(pod)
                self.account.ledgers[pod.id].gpu_off(self.clock.now())

    def vanish(self, instance_id: str) -> None:
        with self.account.lock:
            self.account.release(self.account.pod(instance_id))
            self.account.ledgers[instance_id].delete(self.clock.now())
            del self.account.pods[instance_id]
            self.ssh.stop(instance_id)
            self.account.log_written.notify_all()

    def billed(self, instance_id: str) -> dict[str, float]:
        """The pod's whole ledger up to now, unrounded: {"gpu", "disk", "total"} ("gpu" is
        the compute: a CPU pod's vCPUs too)."""
        with self.account.lock:
            ledger = self.account.ledgers[instance_id]
            gpu, disk = ledger.amounts(ledger.created_at, self.clock.now())
            return {"gpu": gpu, "disk": disk, "total": gpu + disk}

    def fail_instance(self, instance_id: str) -> None:
        with self.account.lock:
            self.account.pod(instance_id).errored = True

    def move_instance(self, instance_id: str, public_ip: str) -> None:
        """The pod comes back on another machine (a host migration): a new public IP."""
        with self.account.lock:
            self.account.pod(instance_id).public_ip = public_ip

    def stick_runtime_null(self, instance_id: str) -> None:
        with self.account.lock:
            self.account.pod(instance_id).runtime_stuck = True

    def set_instance_fields(self, instance_id: str, fields: Mapping[str, Any]) -> None:
        """Serve these raw fields on the pod as given, to act out a changed API."""
        with self.account.lock:
            self.account.pod(instance_id).overrides.update(fields)

    def add_instance(
        self,
        name: str,
        *,
        image: str = "ubuntu:22.04",
        gpu_type_id: str | None = None,
        gpu_count: int = 1,
        cloud: str = "SECURE",
        datacenter_id: str | None = None,
        env: Mapping[str, str] | None = None,
        ports: Sequence[str] = (),
        running: bool = True,
    ) -> str:
        """Seed a pod without the API: no quota, capacity, balance or listing lag."""
        with self.account.lock:
            gpu = self.account.catalog.gpus[gpu_type_id or next(iter(self.account.catalog.gpus))]
            body = {"name": name, "image": image, "env": dict(env or {}), "ports": list(ports)}
            datacenter = (
                datacenter_id or (self.account.catalog.datacenters_of(gpu.id) or ["US-TX-3"])[0]
            )
            pod = self._pod_routes.new_pod(
                body, gpu.id, gpu_count, cloud, datacenter, self.clock.now()
            )
            pod.holds_capacity = False
            pod.listed_from = None
            if running:
                pod.starting_at = pod.running_at = pod.created_at
            return pod.id

    def add_foreign_instance(self, name: str = "someone-elses-pod", **settings: Any) -> str:
        """A pod somebody else made in the account: it carries none of our tags."""
        env = {
            key: value
            for key, value in (settings.pop("env", None) or {}).items()
            if key not in (OWNER_ENV, POD_UID_ENV)
        }
        return self.add_instance(name, env=env, **settings)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reconciler.sim.runpod", description="Serve a simulated RunPod REST v2 API."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--api-key", default="sim-key", help="the bearer key to accept")
    args = parser.parse_args(argv)
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with RunPodSimulator(args.api_key, host=args.host, port=args.port, clock=real_start()) as sim:
        print(sim.base_url, flush=True)
        while not stopping.wait(0.5):
            continue
    return 0
