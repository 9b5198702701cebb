"""A loopback RunPod REST v2 server for tests, benchmarks and the demo.

It serves what the reconciler uses, with the contract's status codes and
`application/problem+json` errors:

    GET    /v2/pods                 every listed pod (after the listing lag)
    POST   /v2/pods                 create: 201 PROVISIONING; 400 rule/capacity/unknown
                                    data center, 402, 404 template/registry, 422
    GET    /v2/pods/{id}            one pod (404 once deleted)
    DELETE /v2/pods/{id}            204; 404 for an unknown id
    POST   /v2/pods/{id}/action     start|stop|restart (200 + pod), terminate (204); 409
    GET    /v2/pods/{id}/logs       SSE (`source`, `tail`, `since`, `Last-Event-ID`): open
                                    while the pod runs (see `runpod_logs`)
    GET    /v2/catalog/gpus         `include=AVAILABILITY&product=POD`, `count`, `cloud`
    GET    /v2/catalog/cpus         `include=AVAILABILITY&product=POD`
    PATCH  /v2/pods/{id}            update; `env` replaces the whole env (PATCH semantics)
    GET    /v2/registries, POST /v2/registries   (the password is never echoed)
    GET    /v2/registries/{id}, DELETE /v2/registries/{id}   (400 while a pod uses it)
    GET    /v2/billing/pods, GET /v2/billing     from each pod's ledger (see runpod_billing)
    /v2/network-volumes, /v2/billing/network-volumes   see runpod_volumes; a pod's
                                    network mount pins it to the volume's data center
    POST   /v2/clusters             create an Instant Cluster: 201; 400 no room in one data
                                    center, 402, 422 (see runpod_clusters)
    GET    /v2/clusters, GET|PATCH|DELETE /v2/clusters/{id}, GET /v2/clusters/{id}/pods
    GET    /v2/billing/clusters     one record per cluster per bucket

Cluster members are pods: `GET /v2/pods` leaves them out unless `includeClusterPods=true`,
`GET /v2/pods/{id}` and its logs serve them, and PATCH, DELETE and actions on them are
refused with 409 (only deleting their cluster ends them).

A deleted pod leaves the list at once, but `GET /v2/pods/{id}` keeps serving it with
status TERMINATED (cost 0, no runtime, no actions), as the contract's status says.
RunPod's gateway refuses urllib's default User-Agent (`Python-urllib/*`) with 403 and
error code 1010; the simulator does the same. Every API request's headers are recorded
(Authorization masked) so tests can check what a client sent.

Pods live on a `SimClock`: PROVISIONING for `provisioning_seconds`, STARTING for
`starting_seconds` plus the image's pull time (`set_image_pull_seconds`), then RUNNING
with a runtime (public IP and port per `tcp` port; `http` ports go through RunPod's
proxy and carry no public address). Time moves only through `advance()` (or a client
whose `sleep` is the clock's), and every answer's `Date` header is read from it.
Every authenticated answer carries `RateLimit` and `RateLimit-Policy`; a spent window
answers 429 with `Retry-After`.

Test controls, in process and over HTTP under `/_sim/` (no key needed, not rate
limited, not in the request log); bodies are JSON:

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
    POST   /_sim/capacity                    {"gpuTypeId", "dataCenterId", "count"}
    POST   /_sim/balance                     {"dollars": 12.5 or null}
    POST   /_sim/listing-lag                 {"seconds": 20}: pods, clusters and network
                                              volumes made from now on are listed that
                                              much later (`runpod_listing`)
    POST   /_sim/listing-lag/catch-up        everything listed now, as once its lag passed
    POST   /_sim/image-pull                  {"image", "seconds"}
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
127.0.0.1 (see `runpod_ssh`: commands run with `sh` in a per-pod sandbox directory that
stands for the pod's filesystem); its `22/tcp` mapping, when published, is the sshd's
port, so `ssh.direct` leads to it once the pod runs. Each pod's public IP is its own
address in 203.0.113.0/24 (as a real pod shows its machine's), which this machine does
not route: clients reach it through `runpod_net.PROXY_COMMAND` (their SSH ProxyCommand).
`ssh_sandbox(id)` and `ssh_host_key(id)` let tests look inside.

Run as a process: `python -m reconciler.sim.runpod --port 8080 --api-key KEY` prints its
base URL as the first line of stdout and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import fnmatch
import hmac
import json
import random
import re
import signal
import string
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from email.utils import formatdate
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.sim import runpod_billing as billing
from reconciler.sim import runpod_clusters
from reconciler.sim.clock import SimClock, real_start
from reconciler.sim.runpod_catalog import DEFAULT_CPU_FLAVORS, DEFAULT_GPU_TYPES, Catalog
from reconciler.sim.runpod_limits import RateWindows
from reconciler.sim.runpod_logs import LogStream, new_lines, open_stream
from reconciler.sim.runpod_pods import (
    ACTIONS_BY_STATUS,
    LogLine,
    Membership,
    SimPod,
    iso,
    sse_event,
)
from reconciler.sim.runpod_validate import (
    Problem,
    check_create_pod,
    check_create_registry,
    check_mount_change,
    check_pod_action,
    check_port,
    check_update_pod,
)
from reconciler.sim.runpod_volumes import SimVolume, Volumes

if TYPE_CHECKING:
    from reconciler.sim.runpod_ssh import SshHost

REQUEST_LOG_LIMIT = 20_000
# The User-Agent urllib sends by default; RunPod's gateway answers it 403 (error 1010).
_REFUSED_USER_AGENT = "python-urllib/"
# How often an idle log stream looks for lines a clock move made visible (real seconds).
_LOG_POLL_SECONDS = 0.05
_ID_ALPHABET = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class SimRequest:
    """One API request as the simulator saw it (the body as sent, secrets masked)."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    """The request's headers (Authorization masked), names as the client spelled them."""
    at: str = ""
    """When the simulator answered it (its clock, ISO 8601)."""
    created: str | None = None
    """The id of the pod this request created, whatever the answer said (a create that
    fails after the pod was made answers 5xx, and the pod exists all the same)."""
    listed_from: str | None = None
    """For a create: when the new pod first shows in the list (the listing lag)."""


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    # Real seconds to stall before answering (create-then-hang).
    hang: float = 0.0
    # A log stream: the body is its backfill, then the handler keeps it going.
    stream: LogStream | None = None

    @classmethod
    def problem(cls, problem: Problem) -> Reply:
        return cls(problem.status, problem.body(), problem.headers, "application/problem+json")


@dataclass
class _Fault:
    method: str
    path_pattern: str
    status: int
    count: int
    retry_after: int


@dataclass
class _CountedFault:
    count: int
    seconds: float = 0.0

    def spend(self) -> bool:
        """True while the fault still applies, using up one of its occurrences."""
        if self.count <= 0:
            return False
        self.count -= 1
        return True


@dataclass
class _CreateFault:
    count: int
    status: int = 500
    hang: float = 0.0


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    now: datetime
    match: dict[str, str]
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def pod_id(self) -> str:
        return unquote(self.match["id"])


Handler = Callable[["RunPodSimulator", _Request], Reply]
_ROUTES: list[tuple[str, re.Pattern[str], str]] = []
_ADMIN: list[tuple[str, re.Pattern[str], str]] = []


def _route(table: list[tuple[str, re.Pattern[str], str]], method: str, pattern: str) -> Any:
    def register(func: Handler) -> Handler:
        regex = re.compile("^" + pattern.replace("{id}", "(?P<id>[^/]+)") + "$")
        table.append((method, regex, func.__name__))
        return func

    return register


def api(method: str, pattern: str) -> Any:
    return _route(_ROUTES, method, pattern)


def admin(method: str, pattern: str) -> Any:
    return _route(_ADMIN, method, pattern)


class RunPodSimulator:
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
        self._api_key = api_key
        self._address = (host, port)
        self._gpu_types = gpu_types if gpu_types is not None else DEFAULT_GPU_TYPES
        self._quota = quota
        self._boot = (timedelta(seconds=provisioning_seconds), timedelta(seconds=starting_seconds))
        self._lock = threading.RLock()
        # Notified when a pod's log or life changes, so open log streams send at once.
        self._log_written = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._sshd: SshHost | None = None
        self._just_created: SimPod | None = None
        """The pod the request being answered made (for its log entry)."""
        self._volumes = Volumes()
        self.reset()

    def __repr__(self) -> str:
        return f"RunPodSimulator(base_url={self.base_url!r})"

    # Lifecycle

    def start(self) -> RunPodSimulator:
        self._stopping.clear()
        self._server = _Server(self._address, _HttpHandler, self)
        # A short poll interval makes stop() quick, which many short tests feel.
        serve = partial(self._server.serve_forever, poll_interval=0.05)
        threading.Thread(target=serve, name="runpod-sim", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging creates
        if self._sshd is not None:
            self._sshd.close()
            self._sshd = None
        self._volumes.close()
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
        with self._lock:
            if self._sshd is not None:
                self._sshd.close()
                self._sshd = None
            self._catalog = Catalog(self._gpu_types, DEFAULT_CPU_FLAVORS)
            self._volumes.close()
            self._volumes = Volumes()
            self._pods: dict[str, SimPod] = {}
            self._clusters: dict[str, runpod_clusters.SimCluster] = {}
            self._registries: dict[str, str] = {}
            self._ledgers: dict[str, billing.PodLedger] = {}
            self._terminated: dict[str, dict[str, Any]] = {}
            self._ghost_deletes = _CountedFault(0)
            self._ghost_cluster_deletes = _CountedFault(0)
            self._ghost_volume_deletes = _CountedFault(0)
            self._ghost_clusters: dict[str, runpod_clusters.SimCluster] = {}
            """Clusters a DELETE hid but left billing, until their id is deleted again."""
            self._templates: dict[str, dict[str, Any]] = {}
            self._limits = RateWindows(self._quota)
            self._faults: list[_Fault] = []
            self._create_faults: deque[_CreateFault] = deque()
            self._listing_lag = timedelta()
            self._balance: float | None = None
            self._pull_seconds: dict[str, float] = {}
            self._log: deque[SimRequest] = deque(maxlen=REQUEST_LOG_LIMIT)
            self._random = random.Random(0)
            self._next_public_port = 30000
            self._machines = 0  # each pod on a machine of its own, with its own public IP
            self._open_streams: list[LogStream] = []
            self._next_stream_drops: dict[str, int] = {}
            self._backfill_gaps: dict[str, float] = {}

    # Views for tests

    @property
    def instances(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            now = self.clock.now()
            return {pod.id: pod.to_json(now) for pod in self._pods.values()}

    @property
    def clusters(self) -> dict[str, dict[str, Any]]:
        """Every cluster (unlisted ones too) as the API would serve it now, keyed by id."""
        with self._lock:
            now = self.clock.now()
            return {c.id: c.to_json(now) for c in self._clusters.values()}

    @property
    def requests(self) -> list[SimRequest]:
        with self._lock:
            return list(self._log)

    # Test controls

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def exit_process(self, instance_id: str, code: int) -> None:
        """The pod's main process ends with `code` (see `SimPod.exit_process`)."""
        with self._lock:
            pod = self._pod(instance_id)
            pod.exit_process(self.clock.now(), code)
            if pod.stopped_at is not None:
                self._release(pod)
                self._ledgers[pod.id].gpu_off(self.clock.now())

    def vanish(self, instance_id: str) -> None:
        with self._lock:
            self._release(self._pod(instance_id))
            self._ledgers[instance_id].delete(self.clock.now())
            del self._pods[instance_id]
            self._stop_sshd(instance_id)
            self._log_written.notify_all()

    def container_lines(self, instance_id: str) -> list[str]:
        """What the pod's container printed so far."""
        with self._lock:
            return [
                line.line
                for line in self._pod(instance_id).visible_log(self.clock.now(), "container")
            ]

    def write_container_log(self, instance_id: str, lines: Sequence[str]) -> None:
        """The pod's container prints `lines` now (stdout and stderr alike)."""
        with self._lock:
            pod = self._pod(instance_id)
            if not pod.log_is_open(self.clock.now()):
                raise ValueError(
                    f"pod {instance_id} is {pod.status(self.clock.now())}: "
                    "no container is running to print"
                )
            for line in lines:
                pod.write_log(self.clock.now(), "container", str(line))
            self._log_written.notify_all()

    def write_system_log(self, instance_id: str, lines: Sequence[str]) -> None:
        """RunPod itself logs `lines` about the pod now (`source=system`: image pull
        progress, start-up, errors), at any status, as its host does."""
        with self._lock:
            pod = self._pod(instance_id)
            for line in lines:
                pod.write_log(self.clock.now(), "system", str(line))
            self._log_written.notify_all()

    def drop_log_streams(self, instance_id: str, after: int = 0, *, next_one: bool = False) -> int:
        """Cut the pod's open log streams after `after` more events each (or, with
        `next_one`, the next stream opened); returns how many streams were marked."""
        with self._lock:
            self._pod(instance_id)
            if next_one:
                self._next_stream_drops[instance_id] = after
                return 1
            marked = [s for s in self._open_streams if s.pod_id == instance_id]
            for stream in marked:
                stream.drop_after = after
            self._log_written.notify_all()
            return len(marked)

    def slow_log_backfill(self, instance_id: str, seconds: float) -> None:
        """Streams of the pod opened from now on send their backfill one event at a time,
        `seconds` (real time) before each, as a slow server does; 0 makes them prompt."""
        if seconds < 0:
            raise ValueError("seconds must be 0 or more")
        with self._lock:
            self._pod(instance_id)
            self._backfill_gaps[instance_id] = seconds

    @property
    def open_log_streams(self) -> int:
        with self._lock:
            return len(self._open_streams)

    def delete_keeps_billing(self, count: int = 1) -> None:
        """The next `count` DELETEs answer 204 and hide the pod, which goes on billing.

        Acts out the leak the reconciler audits for: RunPod said the pod was gone, yet
        bills for it. A later DELETE of the same id really ends it.
        """
        with self._lock:
            self._ghost_deletes = _CountedFault(count)

    def volume_delete_keeps_billing(self, count: int = 1) -> None:
        """The next `count` network-volume DELETEs answer 204 and hide the volume (404,
        not listed), which goes on billing; a later DELETE of the same id ends it."""
        with self._lock:
            self._ghost_volume_deletes = _CountedFault(count)

    def cluster_delete_keeps_billing(self, count: int = 1) -> None:
        """The next `count` cluster DELETEs answer 204 and hide the cluster and its
        members, which go on billing; a later DELETE of the same id really ends it."""
        with self._lock:
            self._ghost_cluster_deletes = _CountedFault(count)

    def billed(self, instance_id: str) -> dict[str, float]:
        """The pod's whole ledger up to now, unrounded: {"gpu", "disk", "total"} ("gpu" is
        the compute: a CPU pod's vCPUs too)."""
        with self._lock:
            ledger = self._ledgers[instance_id]
            gpu, disk = ledger.amounts(ledger.created_at, self.clock.now())
            return {"gpu": gpu, "disk": disk, "total": gpu + disk}

    def fail_instance(self, instance_id: str) -> None:
        with self._lock:
            self._pod(instance_id).errored = True

    def move_instance(self, instance_id: str, public_ip: str) -> None:
        """The pod comes back on another machine (a host migration): a new public IP."""
        with self._lock:
            self._pod(instance_id).public_ip = public_ip

    def stick_runtime_null(self, instance_id: str) -> None:
        with self._lock:
            self._pod(instance_id).runtime_stuck = True

    def set_instance_fields(self, instance_id: str, fields: Mapping[str, Any]) -> None:
        """Serve these raw fields on the pod as given, to act out a changed API."""
        with self._lock:
            self._pod(instance_id).overrides.update(fields)

    def inject_fault(
        self, method: str, path_pattern: str, status: int, count: int = 1, *, retry_after: int = 5
    ) -> None:
        """The next `count` matching calls answer `status`; `path_pattern` is a glob."""
        with self._lock:
            self._faults.append(_Fault(method.upper(), path_pattern, status, count, retry_after))

    def create_then_fail(self, count: int = 1, status: int = 500) -> None:
        with self._lock:
            self._create_faults.append(_CreateFault(count, status=status))

    def create_then_hang(self, count: int = 1, seconds: float = 2.0) -> None:
        """The next creates make the pod, then stall `seconds` of real time before answering."""
        with self._lock:
            self._create_faults.append(_CreateFault(count, status=201, hang=seconds))

    def catch_up_listing(self) -> None:
        """Every pod, cluster and network volume shows in its list from now on, as once
        its lag has passed."""
        with self._lock:
            for listed in (
                *self._pods.values(),
                *self._clusters.values(),
                *self._volumes.live.values(),
            ):
                listed.listed_from = None

    def set_listing_lag(self, seconds: float) -> None:
        with self._lock:
            self._listing_lag = timedelta(seconds=seconds)

    def set_capacity(self, gpu_type_id: str, datacenter_id: str, count: int) -> None:
        """Free GPUs of this type in this data center from now on."""
        with self._lock:
            self._catalog.free[(gpu_type_id, datacenter_id)] = count

    def set_balance(self, dollars: float | None) -> None:
        """None = unlimited; otherwise a create needs one hour of its cost in balance."""
        with self._lock:
            self._balance = dollars

    def set_image_pull_seconds(self, image: str, seconds: float) -> None:
        with self._lock:
            self._pull_seconds[image] = seconds

    def add_template(self, template_id: str, **settings: Any) -> None:
        """A pod template: `image`, `args`, `disk`, `ports`, `env` as in a create body."""
        with self._lock:
            self._templates[template_id] = settings

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
        with self._lock:
            gpu = self._catalog.gpus[gpu_type_id or next(iter(self._catalog.gpus))]
            body = {"name": name, "image": image, "env": dict(env or {}), "ports": list(ports)}
            datacenter = datacenter_id or (self._catalog.datacenters_of(gpu.id) or ["US-TX-3"])[0]
            pod = self._new_pod(body, gpu.id, gpu_count, cloud, datacenter, self.clock.now())
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

    # Request handling (called by the HTTP handler)

    def stall(self, seconds: float) -> bool:
        """Wait `seconds` of real time; True if the simulator was stopped meanwhile."""
        return self._stopping.wait(seconds)

    def handle_api(
        self,
        method: str,
        target: str,
        authorization: str | None,
        raw_body: bytes,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        path, params = _split(target)
        body = _parse_json(raw_body)
        seen = {
            name: ("***" if name.lower() == "authorization" else value)
            for name, value in (headers or {}).items()
        }
        with self._lock:
            self._just_created = None
            if _user_agent(seen).lower().startswith(_REFUSED_USER_AGENT):
                reply = Reply.problem(Problem(403, "error code: 1010 (browser signature banned)"))
            else:
                reply = self._authorized_reply(
                    method,
                    path,
                    params,
                    authorization,
                    body,
                    {k.lower(): v for k, v in (headers or {}).items()},
                )
            made = self._just_created
            self._log.append(
                SimRequest(
                    method,
                    path,
                    params,
                    reply.status,
                    _masked(body),
                    seen,
                    iso(self.clock.now()),
                    made.id if made else None,
                    iso(made.listed_from) if made and made.listed_from else None,
                )
            )
        return reply

    def handle_admin(self, method: str, target: str, raw_body: bytes) -> Reply:
        path, params = _split(target)
        with self._lock:
            try:
                body = _parse_json(raw_body)
                if isinstance(body, _BadJson):
                    raise Problem(400, "request body is not valid JSON")
                return self._dispatch(_ADMIN, method, path, params, body)
            except Problem as problem:
                return Reply.problem(problem)
            except KeyError as exc:
                return Reply.problem(Problem(404, f"not found: {exc}"))
            except (ValueError, TypeError) as exc:
                return Reply.problem(Problem(400, str(exc)))

    def _authorized_reply(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        authorization: str | None,
        body: Any,
        request_headers: dict[str, str],
    ) -> Reply:
        if not self._authorized(authorization):
            return Reply.problem(Problem(401, "missing or invalid bearer token"))
        seconds = self.clock.now().timestamp()
        refused = self._limits.admit(seconds)
        headers = self._limits.headers(seconds)
        if refused is not None:
            # As the contract's example: the detail names the window that was exceeded.
            window, retry_after = refused
            detail = f"rate limit exceeded for the {window} window"
            reply = Reply.problem(Problem(429, detail, headers={"Retry-After": str(retry_after)}))
        else:
            reply = self._answer(method, path, params, body, request_headers)
        reply.headers.update(headers)
        return reply

    def _authorized(self, authorization: str | None) -> bool:
        expected = f"Bearer {self._api_key}".encode()
        return authorization is not None and hmac.compare_digest(authorization.encode(), expected)

    def _answer(
        self, method: str, path: str, params: dict[str, str], body: Any, headers: dict[str, str]
    ) -> Reply:
        try:
            self._raise_injected_fault(method, path)
            if isinstance(body, _BadJson):
                raise Problem(400, "request body is not valid JSON")
            return self._dispatch(_ROUTES, method, path, params, body, headers)
        except Problem as problem:
            return Reply.problem(problem)

    def _dispatch(
        self,
        table: list[tuple[str, re.Pattern[str], str]],
        method: str,
        path: str,
        params: dict[str, str],
        body: Any,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        allowed = []
        for route_method, regex, handler in table:
            match = regex.match(path)
            if match is None:
                continue
            if route_method == method:
                request = _Request(
                    method, path, params, body, self.clock.now(), match.groupdict(), headers or {}
                )
                reply: Reply = getattr(self, handler)(request)
                return reply
            allowed.append(route_method)
        if allowed:
            raise Problem(405, "method not allowed here", headers={"Allow": ", ".join(allowed)})
        raise Problem(404, f"no route for {path}")

    def _raise_injected_fault(self, method: str, path: str) -> None:
        for fault in self._faults:
            if fault.method == method and fnmatch.fnmatchcase(path, fault.path_pattern):
                fault.count -= 1
                if fault.count <= 0:
                    self._faults.remove(fault)
                headers = {"Retry-After": str(fault.retry_after)} if fault.status == 429 else {}
                raise Problem(fault.status, "injected fault", headers=headers)

    # Pods

    def _pod(self, instance_id: str) -> SimPod:
        try:
            return self._pods[instance_id]
        except KeyError:
            raise KeyError(f"pod {instance_id}") from None

    def _api_pod(self, request: _Request) -> SimPod:
        pod = self._pods.get(request.pod_id)
        if pod is None:
            raise Problem(404, "pod not found")
        return pod

    def _standalone_pod(self, request: _Request) -> SimPod:
        """The pod a change or delete route may act on: a cluster member is refused."""
        pod = self._api_pod(request)
        if pod.membership is not None:
            raise Problem(
                409,
                f"pod {pod.id} belongs to cluster {pod.membership.cluster_id}: manage it "
                "through /v2/clusters/{id}",
            )
        return pod

    @api("GET", "/v2/pods")
    def _list_pods(self, request: _Request) -> Reply:
        now = request.now
        members = _bool_param(request.params, "includeClusterPods")
        pods = [
            p.to_json(now)
            for p in self._pods.values()
            if p.listed(now) and (members or p.membership is None)
        ]
        return Reply(200, {"pods": pods})

    @api("GET", "/v2/pods/{id}")
    def _get_pod(self, request: _Request) -> Reply:
        terminated = self._terminated.get(request.pod_id)
        if terminated is not None and request.pod_id not in self._pods:
            return Reply(200, terminated)
        return Reply(200, self._api_pod(request).to_json(request.now))

    @api("PATCH", "/v2/pods/{id}")
    def _update_pod(self, request: _Request) -> Reply:
        check_update_pod(request.body)
        pod = self._standalone_pod(request)
        body = request.body
        if "templateId" in body:
            raise Problem(400, "templateId on update is not available in this simulator")
        if "mounts" in body:
            check_mount_change(pod.mounts, body["mounts"])
        registry = body.get("registry")
        if registry is not None and registry not in self._registries:
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
                or self._public_port()
                for spec in pod.ports
            }
        return Reply(200, pod.to_json(request.now))

    @api("DELETE", "/v2/pods/{id}")
    def _delete_pod(self, request: _Request) -> Reply:
        ledger = self._ledgers.get(request.pod_id)
        if request.pod_id in self._terminated and ledger is not None and ledger.deleted_at is None:
            ledger.delete(request.now)  # a pod whose earlier delete kept it billing
            return Reply(204)
        self._end_pod(self._standalone_pod(request), request.now)
        if not self._ghost_deletes.spend():
            self._ledgers[request.pod_id].delete(request.now)
        return Reply(204)

    def _end_pod(self, pod: SimPod, now: datetime) -> None:
        """The pod is gone from the list; its id still answers TERMINATED."""
        self._release(pod)
        terminated = pod.to_json(now)
        terminated.update(status="TERMINATED", cost=0.0, runtime=None, actions=[])
        self._terminated[pod.id] = terminated
        del self._pods[pod.id]
        self._stop_sshd(pod.id)
        self._log_written.notify_all()

    @api("POST", "/v2/pods")
    def _create_pod(self, request: _Request) -> Reply:
        body = self._with_template(request.body)
        cloud = body.get("cloud", "SECURE")
        if "cpu" in body:
            gpu_id, count = body["cpu"]["id"], body["cpu"]["vcpuCount"]
            self._check_cpu_offer(gpu_id, count, cloud, body.get("registry"))
        else:
            gpu_id, count = body["gpu"]["id"], body["gpu"].get("count", 1)
            self._check_offer(gpu_id, count, cloud, body.get("registry"))
        unknown = sorted(set(body.get("dataCenterIds", [])) - self._catalog.datacenters())
        if unknown:
            # A deterministic rule, not capacity: it fails the same on every candidate.
            raise Problem(400, f"dataCenterIds: unknown data center {', '.join(unknown)}")
        allowed = self._volumes.placement(body) or body.get("dataCenterIds", [])
        datacenter = self._catalog.take(gpu_id, count, allowed)
        if datacenter is None:
            wanted = ", ".join(allowed) or "any data center"
            raise Problem(400, f"no capacity: could not place {count} x {gpu_id} in {wanted}")
        pod = self._new_pod(body, gpu_id, count, cloud, datacenter, request.now)
        return self._created(pod, request.now)

    def _with_template(self, body: Any) -> dict[str, Any]:
        check_create_pod(body)
        if "templateId" not in body:
            return dict(body)
        template = self._templates.get(body["templateId"])
        if template is None:
            raise Problem(404, f"template {body['templateId']} not found")
        merged = {**template, **body}
        merged["env"] = {**template.get("env", {}), **body.get("env", {})}
        for port in merged.get("ports", []):
            check_port(port)
        return merged

    def _check_offer(self, gpu_id: str, count: int, cloud: str, registry: str | None) -> None:
        gpu = self._catalog.gpus.get(gpu_id)
        if gpu is None:
            raise Problem(400, f"no capacity: unknown GPU type {gpu_id}")
        if not gpu.offered(cloud) or count > gpu.max_for(cloud):
            raise Problem(400, f"{gpu_id} x {count} is not offered on {cloud} cloud")
        self._check_payable(gpu.price_for(cloud) * count, registry)

    def _check_cpu_offer(
        self, flavor_id: str, vcpus: int, cloud: str, registry: str | None
    ) -> None:
        """The contract: a flavor from the CPU catalog, vcpuCount a power of two valid for
        it. The catalog prices CPU pods for the secure cloud only."""
        flavor = self._catalog.cpus.get(flavor_id)
        if flavor is None:
            raise Problem(400, f"cpu.id: unknown CPU flavor {flavor_id}")
        low, high = flavor["vcpu"]["min"], flavor["vcpu"]["max"]
        if vcpus & (vcpus - 1) or not low <= vcpus <= high:
            raise Problem(
                400, f"cpu.vcpuCount {vcpus}: must be a power of two from {low} to {high}"
            )
        if cloud != "SECURE":
            raise Problem(400, f"CPU pods are not offered on {cloud} cloud")
        self._check_payable(flavor["price"]["securePerVcpu"] * vcpus, registry)

    def _check_payable(self, hourly: float, registry: str | None) -> None:
        if registry is not None and registry not in self._registries:
            # The contract's 404: "not found or not accessible to the caller".
            raise Problem(404, f"registry credential {registry} not found")
        if self._balance is not None and self._balance < hourly:
            raise Problem(402, f"insufficient balance for a pod costing ${hourly:.2f}/h")

    def _created(self, pod: SimPod, now: datetime) -> Reply:
        return self._answer_created(Reply(201, pod.to_json(now)))

    def _answer_created(self, created: Reply) -> Reply:
        """The answer to a create that made its resource, unless a fault loses it."""
        fault = self._create_faults[0] if self._create_faults else None
        if fault is None:
            return created
        fault.count -= 1
        if fault.count <= 0:
            self._create_faults.popleft()
        if fault.hang:
            created.hang = fault.hang
            return created
        raise Problem(fault.status, "upstream failure after the resource was created")

    def _new_pod(
        self,
        body: dict[str, Any],
        gpu_id: str,
        count: int,
        cloud: str,
        datacenter: str,
        now: datetime,
    ) -> SimPod:
        cpu = self._catalog.cpus.get(gpu_id) if "cpu" in body else None
        unit_price = (
            cpu["price"]["securePerVcpu"] if cpu else self._catalog.gpus[gpu_id].price_for(cloud)
        )
        ports = list(body.get("ports", []))
        pod = SimPod(
            id=self._new_id(),
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
            public_ip=self._public_ip(),
            public_ports={int(spec.split("/")[0]): self._public_port() for spec in ports},
            args=body.get("args", ""),
            disk=body.get("disk", 20),
            ports=ports,
            env=dict(body.get("env", {})),
            registry=body.get("registry"),
            mounts=body.get("mounts", {}),
            listed_from=now + self._listing_lag,
            # RunPod derives a CPU pod's RAM from its flavor, in whole GB.
            cpu_memory_gb=int(cpu["ramGbPerVcpu"] * count) if cpu else None,
            start_ssh=bool(body.get("startSsh", False)),
        )
        self._start_sshd(pod)
        self._boot_pod(pod, now, provisioning=self._boot[0])
        self._pods[pod.id] = pod
        self._just_created = pod
        ledger = billing.PodLedger(
            pod.id,
            pod.price_per_gpu * count,
            billing.DISK_USD_PER_GB_HOUR * pod.disk,
            now,
            cpu=cpu is not None,
        )
        ledger.gpu_on(now)
        self._ledgers[pod.id] = ledger
        return pod

    def _start_sshd(self, pod: SimPod) -> None:
        """RunPod's images start sshd from `PUBLIC_KEY`, which reaches a pod with
        `startSsh` (this account registers no keys, so the request must set it)."""
        keys = pod.env.get("PUBLIC_KEY")
        if not (pod.start_ssh and keys):
            return
        if self._sshd is None:
            from reconciler.sim.runpod_ssh import SshHost  # asyncssh only when SSH is used

            self._sshd = SshHost()
        clock = self.clock
        port = self._sshd.start_pod(
            pod.id,
            keys,
            pod.env,
            lambda: pod.status(clock.now()) == "RUNNING",
            self._volumes.mounted_directories(pod.mounts),
        )
        if 22 in pod.public_ports:
            pod.public_ports[22] = port

    def _stop_sshd(self, pod_id: str) -> None:
        if self._sshd is not None:
            self._sshd.stop_pod(pod_id)

    def _ssh_of(self, pod_id: str) -> SshHost:
        self._pod(pod_id)
        if self._sshd is None or pod_id not in self._sshd.pods:
            raise ValueError(f"pod {pod_id} runs no sshd: it needs startSsh and a PUBLIC_KEY")
        return self._sshd

    def set_sshd(self, instance_id: str, running: bool, *, new_host_key: bool = False) -> None:
        """The pod's sshd stops (an image without one) or comes back, perhaps with a
        new host key."""
        with self._lock:
            self._ssh_of(instance_id).set_running(instance_id, running, new_host_key=new_host_key)

    def break_ssh(self, instance_id: str) -> None:
        """The network to the pod breaks: its SSH connections end, no exit status sent."""
        with self._lock:
            self._ssh_of(instance_id).drop_connections(instance_id)

    def serve_http(self, instance_id: str, port: int, body: str) -> None:
        """The pod answers HTTP GET on its loopback `port` with `body`."""
        with self._lock:
            self._ssh_of(instance_id).serve(instance_id, port, body)

    def serve_count(self, instance_id: str, port: int) -> None:
        """The pod's loopback `port` reads until its client ends input (a half-close),
        then answers "N bytes" and closes."""
        with self._lock:
            self._ssh_of(instance_id).serve_count(instance_id, port)

    def ssh_sandbox(self, instance_id: str) -> Path:
        """The directory that stands for the pod's filesystem."""
        with self._lock:
            return self._ssh_of(instance_id).sandbox(instance_id)

    def ssh_host_key(self, instance_id: str) -> str:
        with self._lock:
            return self._ssh_of(instance_id).host_key(instance_id)

    def _boot_pod(self, pod: SimPod, now: datetime, provisioning: timedelta) -> None:
        pull = timedelta(seconds=self._pull_seconds.get(pod.image, 0.0))
        starting_at = now + provisioning
        pod.schedule_boot(starting_at, starting_at + self._boot[1] + pull)

    def _new_id(self) -> str:
        while True:
            candidate = "".join(self._random.choices(_ID_ALPHABET, k=14))
            if candidate not in self._pods:
                return candidate

    def _public_ip(self) -> str:
        self._machines += 1
        return f"203.0.113.{(self._machines - 1) % 254 + 1}"

    def _public_port(self) -> int:
        self._next_public_port += 1
        return self._next_public_port

    def _release(self, pod: SimPod) -> None:
        if pod.holds_capacity:
            self._catalog.give_back(pod.gpu_id, pod.datacenter_id, pod.gpu_count)
            pod.holds_capacity = False

    @api("POST", "/v2/pods/{id}/action")
    def _pod_action(self, request: _Request) -> Reply:
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
        self._release(pod)  # a stopped pod keeps its disk but not its GPUs
        self._ledgers[pod.id].gpu_off(now)

    def _start_pod(self, pod: SimPod, now: datetime) -> None:
        if not pod.holds_capacity:
            if self._catalog.take(pod.gpu_id, pod.gpu_count, [pod.datacenter_id]) is None:
                raise Problem(400, f"no capacity: {pod.gpu_id} is not free on the pod's host")
            pod.holds_capacity = True
        self._boot_pod(pod, now, provisioning=timedelta())
        self._ledgers[pod.id].gpu_on(now)

    def _restart_pod(self, pod: SimPod, now: datetime) -> None:
        pod.restart(now, "container restarted on request")

    @api("GET", "/v2/pods/{id}/logs")
    def _pod_logs(self, request: _Request) -> Reply:
        pod = self._api_pod(request)
        stream = open_stream(pod, request.now, request.params, request.headers.get("last-event-id"))
        if pod.id in self._next_stream_drops:
            stream.drop_after = self._next_stream_drops.pop(pod.id)
        stream.backfill_gap = self._backfill_gaps.get(pod.id, 0.0)
        # Open from now on (before its first byte), so a test can cut it at once.
        self._open_streams.append(stream)
        headers = {
            "Cache-Control": "no-cache",
            "Connection": "keep-alive",
            "X-Accel-Buffering": "no",
        }
        return Reply(200, None, headers, "text/event-stream; charset=utf-8", stream=stream)

    def serve_log_stream(self, stream: LogStream, send: Callable[[bytes], None]) -> bool:
        """Send the stream's events through `send` until the pod's log ends (True) or
        the stream is cut (False). Runs in the request's own thread."""
        try:
            if not self._send_backfill(stream, send):
                return False
            while True:
                with self._lock:
                    pod = self._pods.get(stream.pod_id)
                    now = self.clock.now()
                    if pod is None or self._stopping.is_set():
                        return True
                    pending = new_lines(pod, now, stream)
                    if not pending and not pod.log_is_open(now):
                        return True
                    if not pending and stream.drop_after != 0:
                        # Clock moves are not notified: poll for lines they make visible.
                        self._log_written.wait(_LOG_POLL_SECONDS)
                        pending = new_lines(pod, self.clock.now(), stream)
                if not _send_lines(stream, pending, send):
                    return False
        finally:
            self.close_log_stream(stream)

    def _send_backfill(self, stream: LogStream, send: Callable[[bytes], None]) -> bool:
        """The backfill at once, or event by event when the pod's backfills are slow;
        False when the stream was cut."""
        if not stream.backfill_gap:
            return _send_lines(stream, stream.backfill, send)
        for line in stream.backfill:
            if self._stopping.wait(stream.backfill_gap):
                return True  # shutting down: the live loop ends the stream
            if not _send_lines(stream, [line], send):
                return False
        return True

    def close_log_stream(self, stream: LogStream) -> None:
        with self._lock:
            if stream in self._open_streams:  # reset() may have forgotten it
                self._open_streams.remove(stream)

    # Catalog and registries

    @api("GET", "/v2/catalog/gpus")
    def _list_gpus(self, request: _Request) -> Reply:
        params = request.params
        include = [item for item in params.get("include", "").split(",") if item]
        if any(item != "AVAILABILITY" for item in include):
            raise Problem(422, "Request validation failed.", errors=["include: AVAILABILITY"])
        stock_params = {"product", "count", "cloud"} & params.keys()
        if bool(include) != ("product" in params) or (stock_params and not include):
            raise Problem(400, "product, count and cloud require include=AVAILABILITY")
        count = _int_param(params, "count", 1, 1, 64)
        cloud = params.get("cloud", "SECURE")
        products = set(params.get("product", "POD").split(","))
        if cloud not in ("SECURE", "COMMUNITY") or not products <= {"POD", "CLUSTER", "SERVERLESS"}:
            raise Problem(422, "Request validation failed.", errors=["cloud or product: bad value"])
        return Reply(200, {"gpus": self._catalog.listing(count, cloud if include else None)})

    @api("GET", "/v2/catalog/cpus")
    def _list_cpus(self, request: _Request) -> Reply:
        params = request.params
        include = [item for item in params.get("include", "").split(",") if item]
        if any(item != "AVAILABILITY" for item in include):
            raise Problem(422, "Request validation failed.", errors=["include: AVAILABILITY"])
        if bool(include) != ("product" in params) or ("vcpuCount" in params and not include):
            raise Problem(400, "product and vcpuCount require include=AVAILABILITY")
        if not set(params.get("product", "POD").split(",")) <= {"POD", "SERVERLESS"}:
            raise Problem(422, "Request validation failed.", errors=["product: bad value"])
        return Reply(200, {"cpus": self._catalog.cpu_listing(available=bool(include))})

    @api("GET", "/v2/registries")
    def _list_registries(self, request: _Request) -> Reply:
        entries = [{"id": key, "name": name} for key, name in self._registries.items()]
        return Reply(200, {"registries": entries})

    @api("POST", "/v2/registries")
    def _create_registry(self, request: _Request) -> Reply:
        check_create_registry(request.body)
        name = request.body["name"]
        if name in self._registries.values():
            raise Problem(400, f"a registry credential named {name!r} already exists")
        registry_id = "reg_" + self._new_id()[:8]
        self._registries[registry_id] = name
        return Reply(201, {"id": registry_id, "name": name})

    @api("GET", "/v2/registries/{id}")
    def _get_registry(self, request: _Request) -> Reply:
        name = self._registries.get(request.pod_id)
        if name is None:
            raise Problem(404, "registry credential not found")
        return Reply(200, {"id": request.pod_id, "name": name})

    @api("DELETE", "/v2/registries/{id}")
    def _delete_registry(self, request: _Request) -> Reply:
        if request.pod_id not in self._registries:
            raise Problem(404, "registry credential not found")
        users = sorted(p.id for p in self._pods.values() if p.registry == request.pod_id)
        if users:
            raise Problem(400, f"registry credential is in use by pod {users[0]}")
        del self._registries[request.pod_id]
        return Reply(204)

    # Clusters

    @api("POST", "/v2/clusters")
    def _create_cluster(self, request: _Request) -> Reply:
        body = request.body
        runpod_clusters.check_create_cluster(body)
        compute = body["compute"]
        gpu_id, per_pod, count = (
            compute["gpuTypeId"],
            compute["gpuCountPerPod"],
            compute["podCount"],
        )
        gpu = self._catalog.gpus.get(gpu_id)
        if gpu is None:
            raise Problem(400, f"no capacity: unknown GPU type {gpu_id}")
        if not gpu.offered("SECURE") or per_pod > gpu.max_for("SECURE"):
            raise Problem(400, f"{gpu_id} x {per_pod} per pod is not offered for clusters")
        for port in body.get("ports", []):
            check_port(port)
        self._check_payable(gpu.price_for("SECURE") * per_pod * count, None)
        wanted = body.get("dataCenterIds", [])
        unknown = sorted(set(wanted) - self._catalog.datacenters())
        if unknown:
            raise Problem(400, f"dataCenterIds: unknown data center {', '.join(unknown)}")
        # One data center must hold the whole cluster.
        datacenter = self._catalog.take(gpu_id, per_pod * count, wanted)
        if datacenter is None:
            where = ", ".join(wanted) or "any one data center"
            raise Problem(
                400, f"no capacity: could not place {count} x {per_pod} {gpu_id} in {where}"
            )
        cluster = runpod_clusters.SimCluster(
            id="cluster_" + self._new_id()[:10],
            name=body["name"],
            type=body["type"],
            compute=dict(compute),
            datacenter_id=datacenter,
            created_at=request.now,
            vxlan_id=len(self._clusters) + 100,
            listed_from=request.now + self._listing_lag,
        )
        # Ranks run against creation order, so a client that pairs members by the order
        # it lists them in, rather than by rank, is caught.
        for index, rank in enumerate(reversed(range(count))):
            member = {
                key: body[key]
                for key in ("image", "args", "disk", "ports", "env", "mounts", "startSsh")
                if key in body
            }
            pod = self._new_pod(
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
                runpod_clusters.overlay_ip(rank),
                runpod_clusters.role_of(cluster.type, rank),
            )
            pod.listed_from = cluster.listed_from
            self._ledgers[pod.id].cluster_id = cluster.id
            cluster.members.append(pod)
        self._just_created = None  # the request log's `created` names pods made alone
        self._clusters[cluster.id] = cluster
        return self._answer_created(Reply(201, cluster.to_json(request.now)))

    def _api_cluster(self, request: _Request) -> runpod_clusters.SimCluster:
        cluster = self._clusters.get(request.pod_id)
        if cluster is None:
            raise Problem(404, "cluster not found")
        return cluster

    @api("GET", "/v2/clusters")
    def _list_clusters(self, request: _Request) -> Reply:
        now = request.now
        listed = [c.to_json(now) for c in self._clusters.values() if c.listed(now)]
        return Reply(200, {"clusters": listed})

    @api("GET", "/v2/clusters/{id}")
    def _get_cluster(self, request: _Request) -> Reply:
        return Reply(200, self._api_cluster(request).to_json(request.now))

    @api("PATCH", "/v2/clusters/{id}")
    def _rename_cluster(self, request: _Request) -> Reply:
        runpod_clusters.check_update_cluster(request.body)
        cluster = self._api_cluster(request)
        cluster.name = request.body["name"]
        return Reply(200, cluster.to_json(request.now))

    @api("DELETE", "/v2/clusters/{id}")
    def _delete_cluster(self, request: _Request) -> Reply:
        ghost = self._ghost_clusters.pop(request.pod_id, None)
        if ghost is not None:  # a cluster whose earlier delete kept it billing
            for pod in ghost.members:
                self._ledgers[pod.id].delete(request.now)
            return Reply(204)
        cluster = self._api_cluster(request)
        keeps_billing = self._ghost_cluster_deletes.spend()
        for pod in cluster.members:
            self._end_pod(pod, request.now)
            if not keeps_billing:
                self._ledgers[pod.id].delete(request.now)
        del self._clusters[cluster.id]
        if keeps_billing:
            self._ghost_clusters[cluster.id] = cluster
        return Reply(204)

    @api("GET", "/v2/clusters/{id}/pods")
    def _cluster_pods(self, request: _Request) -> Reply:
        members = self._api_cluster(request).members
        return Reply(200, {"pods": [pod.to_json(request.now) for pod in members]})

    # Billing

    @api("GET", "/v2/billing/clusters")
    def _cluster_billing(self, request: _Request) -> Reply:
        billing.check_filters(request.params, "clusterId")
        window = billing.resolve_window(request.params, request.now)
        cluster_id = request.params.get("clusterId")
        return Reply(200, billing.cluster_billing(self._ledgers, window, cluster_id))

    @api("GET", "/v2/billing/pods")
    def _pod_billing(self, request: _Request) -> Reply:
        billing.check_filters(request.params, "podId")
        window = billing.resolve_window(request.params, request.now)
        return Reply(200, billing.pod_billing(self._ledgers, window, request.params.get("podId")))

    @api("GET", "/v2/billing")
    def _billing(self, request: _Request) -> Reply:
        billing.check_filters(request.params, None)
        window = billing.resolve_window(request.params, request.now)
        return Reply(200, billing.account_billing(self._ledgers, window))

    # Network volumes

    @api("GET", "/v2/network-volumes")
    def _list_volumes(self, request: _Request) -> Reply:
        volumes = [volume.to_json() for volume in self._volumes.listed(request.now)]
        return Reply(200, {"networkVolumes": volumes})

    @api("POST", "/v2/network-volumes")
    def _create_volume(self, request: _Request) -> Reply:
        datacenters = self._catalog.datacenters()
        listed_from = request.now + self._listing_lag
        made = self._volumes.create(request.body, datacenters, request.now, listed_from)
        return Reply(201, made.to_json())

    @api("GET", "/v2/network-volumes/{id}")
    def _get_volume(self, request: _Request) -> Reply:
        return Reply(200, self._volumes.get(request.pod_id).to_json())

    @api("PATCH", "/v2/network-volumes/{id}")
    def _update_volume(self, request: _Request) -> Reply:
        volume = self._volumes.update(request.pod_id, request.body, request.now)
        return Reply(200, volume.to_json())

    @api("DELETE", "/v2/network-volumes/{id}")
    def _delete_volume(self, request: _Request) -> Reply:
        users = self._mounting(request.pod_id)
        keeps_billing = (
            request.pod_id in self._volumes.live
            and not users
            and self._ghost_volume_deletes.spend()
        )
        self._volumes.delete(request.pod_id, users, request.now, keeps_billing)
        return Reply(204)

    @api("GET", "/v2/billing/network-volumes")
    def _volume_billing(self, request: _Request) -> Reply:
        billing.check_filters(request.params, "networkVolumeId")
        window = billing.resolve_window(request.params, request.now)
        volume_id = request.params.get("networkVolumeId")
        return Reply(200, self._volumes.billing(window, volume_id, request.now))

    def _mounting(self, volume_id: str) -> list[str]:
        """The pods (stopped ones too) that have the volume attached."""
        return [
            pod.id
            for pod in self._pods.values()
            if any(m["volumeId"] == volume_id for m in pod.mounts.get("network", []))
        ]

    @property
    def volumes(self) -> dict[str, dict[str, Any]]:
        """Every live network volume as the API serves it, keyed by id."""
        with self._lock:
            return {v.id: v.to_json() for v in self._volumes.live.values()}

    def add_volume(
        self, name: str, size: int, datacenter: str, kind: str = "STANDARD"
    ) -> SimVolume:
        """A volume made without the API (someone's console): no quota, no request log."""
        with self._lock:
            return self._volumes.add(name, size, datacenter, self.clock.now(), kind)

    def volume_directory(self, volume_id: str) -> Path:
        """The directory that holds the volume's data."""
        with self._lock:
            return self._volumes.get(volume_id).directory

    # Admin routes

    @admin("POST", "/_sim/clock/advance")
    def _admin_advance(self, request: _Request) -> Reply:
        self.advance(float(request.body["seconds"]))
        return Reply(200, {"now": iso(self.clock.now())})

    @admin("POST", "/_sim/pods")
    def _admin_add_pod(self, request: _Request) -> Reply:
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
        return Reply(201, {"id": self.add_instance(body["name"], **settings)})

    @admin("POST", "/_sim/pods/{id}/exit")
    def _admin_exit(self, request: _Request) -> Reply:
        self.exit_process(request.pod_id, int(request.body["code"]))
        return Reply(204)

    @admin("POST", "/_sim/pods/{id}/stick-runtime-null")
    def _admin_stick(self, request: _Request) -> Reply:
        self.stick_runtime_null(request.pod_id)
        return Reply(204)

    @admin("POST", "/_sim/pods/{id}/fail")
    def _admin_fail(self, request: _Request) -> Reply:
        self.fail_instance(request.pod_id)
        return Reply(204)

    @admin("POST", "/_sim/pods/{id}/logs")
    def _admin_logs(self, request: _Request) -> Reply:
        lines = request.body.get("lines") if isinstance(request.body, dict) else None
        if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
            raise ValueError('the body must be {"lines": ["...", ...]}')
        self.write_container_log(request.pod_id, lines)
        return Reply(204)

    @admin("POST", "/_sim/pods/{id}/logs/drop")
    def _admin_drop_logs(self, request: _Request) -> Reply:
        body = request.body or {}
        marked = self.drop_log_streams(
            request.pod_id, int(body.get("after", 0)), next_one=bool(body.get("next", False))
        )
        return Reply(200, {"streams": marked})

    @admin("POST", "/_sim/pods/{id}/logs/slow")
    def _admin_slow_logs(self, request: _Request) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        self.slow_log_backfill(request.pod_id, float(body.get("seconds", 0)))
        return Reply(204)

    @admin("POST", "/_sim/pods/{id}/fields")
    def _admin_fields(self, request: _Request) -> Reply:
        self.set_instance_fields(request.pod_id, dict(request.body))
        return Reply(204)

    @admin("POST", "/_sim/pods/{id}/sshd")
    def _admin_sshd(self, request: _Request) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        if not isinstance(body.get("running"), bool):
            raise ValueError('the body must be {"running": true|false}')
        self.set_sshd(request.pod_id, body["running"], new_host_key=bool(body.get("newHostKey")))
        return Reply(204)

    @admin("POST", "/_sim/pods/{id}/serve")
    def _admin_serve(self, request: _Request) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        if not isinstance(body.get("port"), int) or not isinstance(body.get("body"), str):
            raise ValueError('the body must be {"port": 8888, "body": "..."}')
        self.serve_http(request.pod_id, body["port"], body["body"])
        return Reply(204)

    @admin("DELETE", "/_sim/pods/{id}")
    def _admin_vanish(self, request: _Request) -> Reply:
        self.vanish(request.pod_id)
        return Reply(204)

    @admin("POST", "/_sim/faults")
    def _admin_fault(self, request: _Request) -> Reply:
        body = request.body
        kind, count = body.get("kind", "status"), int(body.get("count", 1))
        if kind == "create-then-fail":
            self.create_then_fail(count, int(body.get("status", 500)))
        elif kind == "create-then-hang":
            self.create_then_hang(count, float(body.get("seconds", 2.0)))
        elif kind == "delete-keeps-billing":
            self.delete_keeps_billing(count)
        elif kind == "volume-delete-keeps-billing":
            self.volume_delete_keeps_billing(count)
        elif kind == "status":
            retry_after = int(body.get("retryAfter", 5))
            fault = (body["method"], body["path"], int(body["status"]), count)
            self.inject_fault(*fault, retry_after=retry_after)
        else:
            raise ValueError(f"unknown fault kind {kind!r}")
        return Reply(204)

    @admin("POST", "/_sim/capacity")
    def _admin_capacity(self, request: _Request) -> Reply:
        body = request.body
        self.set_capacity(body["gpuTypeId"], body["dataCenterId"], int(body["count"]))
        return Reply(204)

    @admin("POST", "/_sim/balance")
    def _admin_balance(self, request: _Request) -> Reply:
        dollars = request.body.get("dollars")
        self.set_balance(None if dollars is None else float(dollars))
        return Reply(204)

    @admin("POST", "/_sim/listing-lag")
    def _admin_listing_lag(self, request: _Request) -> Reply:
        self.set_listing_lag(float(request.body["seconds"]))
        return Reply(204)

    @admin("POST", "/_sim/listing-lag/catch-up")
    def _admin_listing_catch_up(self, request: _Request) -> Reply:
        self.catch_up_listing()
        return Reply(204)

    @admin("POST", "/_sim/image-pull")
    def _admin_image_pull(self, request: _Request) -> Reply:
        self.set_image_pull_seconds(request.body["image"], float(request.body["seconds"]))
        return Reply(204)

    @admin("POST", "/_sim/templates")
    def _admin_template(self, request: _Request) -> Reply:
        settings = dict(request.body)
        self.add_template(settings.pop("id"), **settings)
        return Reply(204)

    @admin("GET", "/_sim/requests")
    def _admin_requests(self, request: _Request) -> Reply:
        return Reply(200, [asdict(entry) for entry in self._log])

    @admin("GET", "/_sim/billing/{id}")
    def _admin_billed(self, request: _Request) -> Reply:
        return Reply(200, self.billed(request.pod_id))

    @admin("GET", "/_sim/state")
    def _admin_state(self, request: _Request) -> Reply:
        pods = [pod.to_json(request.now) for pod in self._pods.values()]
        volumes = [volume.to_json() for volume in self._volumes.live.values()]
        made = [cluster.to_json(request.now) for cluster in self._clusters.values()]
        state = {"now": iso(request.now), "balance": self._balance, "pods": pods}
        return Reply(200, {**state, "networkVolumes": volumes, "clusters": made})

    @admin("POST", "/_sim/network-volumes")
    def _admin_add_volume(self, request: _Request) -> Reply:
        body = request.body
        volume = self.add_volume(
            body["name"], int(body["size"]), body["dataCenter"], body.get("type", "STANDARD")
        )
        return Reply(201, volume.to_json())

    @admin("POST", "/_sim/reset")
    def _admin_reset(self, request: _Request) -> Reply:
        self.reset()
        return Reply(204)


class _BadJson:
    """Marks a body that did not parse, so the answer can be a problem, not a crash."""


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return _BadJson()


def _split(target: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(target)
    return parts.path, dict(parse_qsl(parts.query, keep_blank_values=True))


def _user_agent(headers: Mapping[str, str]) -> str:
    for name, value in headers.items():
        if name.lower() == "user-agent":
            return value
    return ""


def _masked(body: Any) -> Any:
    if isinstance(body, dict) and "password" in body:
        return {**body, "password": "***"}
    return None if isinstance(body, _BadJson) else body


def _bool_param(params: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter, false when absent; anything but true/false is 422."""
    value = params.get(name, "false")
    if value not in ("true", "false"):
        raise Problem(422, "Request validation failed.", errors=[f"{name}: expected boolean"])
    return value == "true"


def _int_param(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(params.get(name, default))
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise Problem(422, "Request validation failed.", errors=[f"{name}: {low}..{high}"])
    return value


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Keep-alive connections park a thread each; closing must not wait for them.
    block_on_close = False
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], sim: RunPodSimulator
    ) -> None:
        super().__init__(address, handler)
        self.simulator = sim


class _HttpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the second one waits for
    # the client's delayed ACK (~40 ms per request).
    disable_nagle_algorithm = True
    server: _Server
    # An idle keep-alive connection gives up its thread after this long.
    timeout = 30

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        sim = self.server.simulator
        if self.path.startswith("/_sim/"):
            reply = sim.handle_admin(method, self.path, raw)
        else:
            reply = sim.handle_api(
                method,
                self.path,
                self.headers.get("Authorization"),
                raw,
                dict(self.headers.items()),
            )
        if reply.hang and sim.stall(reply.hang):
            return
        if reply.stream is not None:
            self._stream(reply, reply.stream)
        else:
            self._write(reply)

    def _stream(self, reply: Reply, stream: LogStream) -> None:
        """Chunked SSE: a clean end sends the last chunk, a cut closes without it."""
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            ended = self.server.simulator.serve_log_stream(stream, self._chunk)
            if ended:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up
        finally:
            self.server.simulator.close_log_stream(stream)
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _write(self, reply: Reply) -> None:
        payload = _encode(reply)
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.status != 204:
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. after its timeout)

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The `Date` header from the simulated clock, as a real server dates its answers
        by its own clock (RFC 9110 §6.6.1): a log stream's Date is when its backfill was
        cut off, so events stamped a second or more after it are live."""
        moment = self.server.simulator.clock.now().timestamp() if timestamp is None else timestamp
        return formatdate(moment, usegmt=True)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is kept by the simulator itself."""


def _send_lines(stream: LogStream, lines: list[LogLine], send: Callable[[bytes], None]) -> bool:
    """Send what the stream may carry of `lines`; False when it must be cut after them."""
    sent, cut = stream.take(lines)
    if sent:
        send("".join(sse_event(line) for line in sent).encode())
    stream.advance(sent)
    return not cut


def _encode(reply: Reply) -> bytes:
    if reply.status == 204 or reply.body is None:
        return b""
    if isinstance(reply.body, bytes):
        return reply.body
    return json.dumps(reply.body, separators=(",", ":")).encode()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a simulated RunPod REST v2 API.")
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


if __name__ == "__main__":
    sys.exit(main())
