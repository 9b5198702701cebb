"""One simulated RunPod pod: its life computed from the clock when it is read.

Nothing runs in the background. A pod stores when it will start its container
(`starting_at`) and when the container will be healthy (`running_at`); its status,
runtime, cost and log are derived from those and the current simulated time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.core.contract import STOP_ON_EXIT_ENV, exit_code_marker
from reconciler.sim.runpod.listing import Listing

ACTIONS_BY_STATUS = {
    "RUNNING": ["stop", "restart", "terminate"],
    "EXITED": ["start", "terminate"],
    "ERROR": ["start", "terminate"],
    "PROVISIONING": ["stop", "terminate"],
    "STARTING": ["stop", "terminate"],
}


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class LogLine:
    ts: datetime
    source: str  # "container" or "system"
    line: str
    seq: int = 0
    """Order of writing; with `ts` it makes the event id a reconnect resumes after."""

    @property
    def key(self) -> tuple[datetime, int]:
        return (self.ts, self.seq)


@dataclass(frozen=True)
class Membership:
    """What makes a pod a cluster member: its cluster, the rank provisioning gives it,
    its overlay address (both null until the pod leaves PROVISIONING) and, for SLURM and
    RAY clusters, its role."""

    cluster_id: str
    rank: int
    ip: str
    role: str | None = None


@dataclass
class SimPod(Listing):
    id: str
    name: str
    image: str
    gpu_id: str
    gpu_count: int
    cloud: str
    datacenter_id: str
    price_per_gpu: float
    created_at: datetime
    starting_at: datetime
    running_at: datetime
    public_ip: str
    public_ports: dict[int, int]
    args: str = ""
    disk: int = 20
    ports: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    registry: str | None = None
    mounts: dict[str, Any] = field(default_factory=dict)
    listed_from: datetime | None = None
    # Seeded pods (foreign, benchmark) were never counted against capacity.
    holds_capacity: bool = True
    stopped_at: datetime | None = None
    errored: bool = False
    restarted_at: datetime | None = None
    runtime_stuck: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    cpu_memory_gb: int | None = None
    """Set on a CPU pod, whose `gpu_id` is then its flavor and `gpu_count` its vCPUs."""
    log: list[LogLine] = field(default_factory=list)
    start_ssh: bool = False
    """The create's `startSsh`: never served, as the contract says."""
    membership: Membership | None = None
    cuda_version: str | None = None
    """The CUDA version its host's driver reports (None: a CPU pod)."""
    start_fails: bool = False
    """Its container cannot start on this host: it stays STARTING, billing, for good."""
    _written: int = 0

    def status(self, now: datetime) -> str:
        if self.stopped_at is not None:
            return "EXITED"
        if self.errored:
            return "ERROR"
        if now < self.starting_at:
            return "PROVISIONING"
        return "STARTING" if now < self.running_at or self.start_fails else "RUNNING"

    def write_log(self, ts: datetime, source: str, line: str) -> None:
        self._written += 1
        self.log.append(LogLine(ts, source, line, self._written))

    def schedule_boot(
        self, starting_at: datetime, running_at: datetime, failure: Sequence[str] | None = None
    ) -> None:
        """Boot from `starting_at`; the container runs at `running_at`, unless `failure`
        holds the system lines of a start that cannot succeed (empty: one that hangs
        without a word): then RunPod says so at that moment and the pod stays STARTING,
        and billing, for good."""
        self.starting_at, self.running_at = starting_at, running_at
        self.stopped_at = None
        self.errored = False
        self.start_fails = failure is not None
        self.write_log(starting_at, "system", f"pulling image {self.image}")
        if failure is None:
            self.write_log(running_at, "container", "container started")
        for line in failure or ():
            self.write_log(running_at, "system", line)

    def stop(self, now: datetime, reason: str = "pod stopped") -> None:
        # Boot lines scheduled for later never happen once the pod is stopped.
        self.log = [line for line in self.log if line.ts <= now]
        self.write_log(now, "system", reason)
        self.stopped_at = now

    def restart(self, now: datetime, reason: str) -> None:
        self.write_log(now, "system", reason)
        self.restarted_at = now

    def exit_process(self, now: datetime, code: int) -> None:
        """The main process ended: our wrapper stops the pod, RunPod restarts anything else.

        A cluster member cannot be stopped (the pod routes answer 409 for members), so
        on a member the wrapper prints its marker and the container goes on running."""
        if self.status(now) != "RUNNING":
            raise ValueError(f"pod {self.id} is {self.status(now)}, no process is running")
        nonce = self.env.get(STOP_ON_EXIT_ENV)
        if nonce:  # the wrapper prints its marker, with its nonce, then stops the pod
            self.write_log(now, "container", f"{exit_code_marker(nonce)}{code}")
            if self.membership is None:
                self.stop(now, "pod stopped by its own container")
        else:
            self.restart(now, f"container exited with code {code}; restarting it")

    def visible_log(self, now: datetime, source: str | None) -> list[LogLine]:
        """The lines written by `now`, in stream order."""
        lines = [line for line in self.log if line.ts <= now and source in (None, line.source)]
        return sorted(lines, key=lambda line: line.key)

    def log_is_open(self, now: datetime) -> bool:
        """A stream stays open while the container runs or is yet to run."""
        return self.status(now) not in ("EXITED", "ERROR")

    def to_json(self, now: datetime) -> dict[str, Any]:
        status = self.status(now)
        body = {
            "id": self.id,
            "name": self.name,
            "image": self.image,
            "args": self.args,
            "disk": self.disk,
            "ports": list(self.ports),
            "env": dict(self.env),
            "registry": self.registry,
            "status": status,
            "actions": ACTIONS_BY_STATUS[status],
            "mounts": self.mounts,
            "cloud": self.cloud,
            "dataCenterId": self.datacenter_id,
            "cudaVersion": self.cuda_version,
            "ssh": self._ssh(status),
            "template": None,
            "cost": self._cost(status),
            "locked": False,
            "globalNetworking": {"enabled": False},
            "runtime": self._runtime(status, now),
            "createdAt": iso(self.created_at),
            "startedAt": (
                iso(self.running_at) if now >= self.running_at and not self.start_fails else None
            ),
        }
        if self.cpu_memory_gb is None:
            body["gpu"] = {"id": self.gpu_id, "count": self.gpu_count}
        else:
            body["cpu"] = {
                "id": self.gpu_id,
                "vcpuCount": self.gpu_count,
                "memory": self.cpu_memory_gb,
            }
        if self.membership is not None:
            body["cluster"] = self.cluster_block(now)
        runtime: dict[str, Any] | None = self._runtime(status, now)
        given = self.overrides.get("runtime")
        body.update(self.overrides)
        if isinstance(given, dict) and given:
            # Utilization set by a test shows while the pod runs, over the live runtime;
            # an empty object or null is served as given (the API's odd answers).
            body["runtime"] = None if runtime is None else {**runtime, **given}
        return body

    def cluster_block(self, now: datetime) -> dict[str, Any] | None:
        """The pod's `cluster` block as served now; None for a standalone pod."""
        member = self.membership
        if member is None:
            return None
        if self.status(now) == "PROVISIONING":
            return {"id": member.cluster_id, "rank": None}
        block: dict[str, Any] = {"id": member.cluster_id, "rank": member.rank, "ip": member.ip}
        if member.role is not None:
            block["role"] = member.role
        return block

    def _cost(self, status: str) -> float:
        if status in ("EXITED", "TERMINATED"):
            return 0.0
        return round(self.price_per_gpu * self.gpu_count, 4)

    def _ssh(self, status: str) -> dict[str, Any]:
        user = f"{self.id}-64411eb2"
        proxy = {"host": "ssh.runpod.io", "port": 22, "username": user}
        proxy["command"] = f"ssh {user}@ssh.runpod.io"
        direct = None
        # Only a running pod with 22/tcp published has a public address for its sshd,
        # whether or not an sshd listens behind it.
        if "22/tcp" in self.ports and status == "RUNNING":
            host, port = self.public_ip, self.public_ports[22]
            command = f"ssh root@{host} -p {port}"
            direct = {"host": host, "port": port, "username": "root", "command": command}
        return {"proxy": proxy, "direct": direct}

    def _runtime(self, status: str, now: datetime) -> dict[str, Any] | None:
        if status != "RUNNING" or self.runtime_stuck:
            return None
        since = max(self.running_at, self.restarted_at or self.running_at)
        runtime: dict[str, Any] = {
            "uptime": int((now - since).total_seconds()),
            "ports": [self._runtime_port(spec) for spec in self.ports],
            "cpu": {"util": 0},
            "memory": {"util": 0},
        }
        if self.cpu_memory_gb is None:
            runtime["gpus"] = [{"util": 0, "memoryUtil": 0} for _ in range(self.gpu_count)]
        return runtime

    def _runtime_port(self, spec: str) -> dict[str, Any]:
        port, protocol = int(spec.split("/")[0]), spec.split("/")[1]
        if protocol == "http":
            # HTTP ports are reached through RunPod's HTTPS proxy, not a public address.
            return {"private": port, "public": None, "type": "http", "ip": None}
        return {
            "private": port,
            "public": self.public_ports[port],
            "type": "tcp",
            "ip": self.public_ip,
        }


def event_id(line: LogLine) -> str:
    return f"{iso(line.ts)}/{line.seq:012d}"


def sse_event(line: LogLine) -> str:
    payload = json.dumps({"ts": iso(line.ts), "source": line.source, "line": line.line})
    return f"id: {event_id(line)}\ndata: {payload}\n\n"
