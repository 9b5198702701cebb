"""The world the scale benchmark runs against, and the reconciler it measures.

`SimHost` owns both simulators and their shared `SimClock`, seeds them in bulk and can
drive them to steady state with a reconciler of its own. It runs in-process for the
smoke test (`local_world`) or in a spawned child process for the benchmark
(`remote_world`): then the measuring process contains the reconciler and nothing else,
so its CPU time, its peak RSS and its tracemalloc peak are the reconciler's alone.

`MeasuredReconciler` is the reconciler under test: the real clients over loopback HTTP,
a SQLite store whose write statements are counted, and an `Engine`, on a clock that
moves the host's clock with it (the RunPod client's pacing sleeps advance both).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.managers import BaseManager
from typing import Any

import kubernetes
from sqlalchemy import Engine as SqlEngine
from sqlalchemy import event

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.repository import Store
from reconciler.core.config import Settings
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.runtime.process.metrics import Metrics
from reconciler.runtime.process.wiring import RunMode, compose
from reconciler.runtime.tick.engine import Engine, TickReport
from reconciler.sim.clock import SimClock

API_KEY = "bench-runpod-key"
TOKEN = "bench-kube-token"
NAMESPACE = "bench"
DEFAULT_QUOTA = (60, 3000, 50000)
RAISED_QUOTA = (1_000_000, 10_000_000, 100_000_000)
WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def bench_settings(n: int, **changes: Any) -> Settings:
    """Settings whose budgets never bind at n pods; the cluster id is fixed."""
    base = Settings.of(
        cluster_id="bench-cluster",
        max_instances=10 * n + 100,
        max_hourly_spend=1e9,
        node_pods=10 * n + 100,
        node_gpus=10 * n + 100,
    )
    return base.with_values(**changes)


@dataclass(frozen=True)
class RequestLog:
    """Requests the simulators answered since a mark: (method, path, query, status)."""

    kube: list[tuple[str, str, str, int]]
    runpod: list[tuple[str, str, str, int]]


def _pod_manifest(name: str, node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {}},
        "spec": {
            "nodeName": node_name,
            "restartPolicy": "Always",
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
        },
    }


def ample_capacity(free_gpus: int = 1_000_000) -> list[dict[str, Any]]:
    """The default catalog with every stocked (type, data center) holding `free_gpus`.

    The benchmark measures pacing against the quota; the default few dozen GPUs per
    type would turn a large burst into a capacity test instead.
    """
    from reconciler.sim.runpod.catalog import DEFAULT_GPU_TYPES

    return [
        {
            **gpu,
            "capacity": {dc: free_gpus if count else 0 for dc, count in gpu["capacity"].items()},
        }
        for gpu in DEFAULT_GPU_TYPES
    ]


class SimHost:
    """Both simulators on one clock, with bulk seeding that bypasses their APIs.

    The simulators are imported here, not at the top: the measured process (the
    reconciler's, when the host runs remotely) must hold only what a reconciler holds."""

    def __init__(self, quota: tuple[int, int, int] = DEFAULT_QUOTA) -> None:
        from reconciler.sim.kube.simulator import KubeSimulator
        from reconciler.sim.runpod.simulator import RunPodSimulator

        self.clock = SimClock()
        self.runpod = RunPodSimulator(
            API_KEY, clock=self.clock, quota=quota, gpu_types=ample_capacity()
        ).start()
        self.kube = KubeSimulator(TOKEN, clock=self.clock).start()
        self.kube.put(
            "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        self._runpod_mark = 0
        self._seeder: MeasuredReconciler | None = None

    def urls(self) -> tuple[str, str]:
        return self.runpod.base_url, self.kube.base_url

    def stop(self) -> None:
        self.kube.stop()
        self.runpod.stop()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def cpu_seconds(self) -> float:
        """CPU of this process: the simulators' alone when the host runs remotely."""
        return time.process_time()

    def add_pods(self, prefix: str, count: int, node_name: str) -> list[tuple[str, str]]:
        """Pods bound to the virtual node, as (name, uid)."""
        created = [
            self.kube.create_pod(_pod_manifest(f"{prefix}-{i:05d}", node_name))
            for i in range(count)
        ]
        return [(p["metadata"]["name"], p["metadata"]["uid"]) for p in created]

    def add_instances(self, owner_id: str, pods: list[tuple[str, str]]) -> None:
        """A running owned instance per pod, as if an earlier reconciler had made it."""
        for name, uid in pods:
            self.runpod.add_instance(
                f"{NAMESPACE}-{name}-{uid[:8]}", env={OWNER_ENV: owner_id, POD_UID_ENV: uid}
            )

    def add_cpu_pods(self, prefix: str, count: int, node_name: str) -> None:
        """Pods asking for CPUs and memory only: the reconciler gives each a CPU instance."""
        for i in range(count):
            manifest = _pod_manifest(f"{prefix}-{i:05d}", node_name)
            container = manifest["spec"]["containers"][0]
            container["resources"] = {"limits": {"cpu": "2", "memory": "4Gi"}}
            self.kube.create_pod(manifest)

    def add_gangs(self, prefix: str, count: int, node_name: str, size: int = 2) -> None:
        """Indexed Jobs whose pods ask to run as one Instant Cluster; the Kubernetes
        simulator's Job controller makes their pods."""
        for i in range(count):
            template = _pod_manifest("unused", node_name)
            template["spec"]["restartPolicy"] = "Never"
            template["spec"]["containers"][0]["command"] = ["torchrun", "train.py"]
            template["metadata"] = {"annotations": {"runpod.io/cluster": "true"}}
            spec = {
                "completionMode": "Indexed",
                "completions": size,
                "parallelism": size,
                "backoffLimit": 6,
                "template": template,
            }
            job = {"apiVersion": "batch/v1", "kind": "Job", "spec": spec}
            self.kube.put(
                "jobs", {**job, "metadata": {"name": f"{prefix}-{i:04d}", "namespace": NAMESPACE}}
            )

    def add_claims(self, prefix: str, count: int) -> None:
        """Claims of our StorageClass that bind at once, each to a volume of its own."""
        from reconciler.core.resources.volume_objects import PROVISIONER

        self.kube.put(
            "storageclasses",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": "runpod"},
                "provisioner": PROVISIONER,
                "parameters": {"dataCenter": "EU-RO-1"},
                "volumeBindingMode": "Immediate",
            },
        )
        for i in range(count):
            claim = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"{prefix}-{i:05d}", "namespace": NAMESPACE},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "resources": {"requests": {"storage": "10Gi"}},
                    "storageClassName": "runpod",
                },
            }
            self.kube.put("persistentvolumeclaims", claim)

    def delete_pods(self, names: list[str], grace_seconds: int = 30) -> None:
        for name in names:
            self.kube.delete_pod(NAMESPACE, name, grace_seconds)

    def pods_with_instance(self, owner_id: str, uids: list[str]) -> int:
        wanted = set(uids)
        found = {
            i["env"].get(POD_UID_ENV)
            for i in self.runpod.instances.values()
            if (i.get("env") or {}).get(OWNER_ENV) == owner_id and i.get("status") != "TERMINATED"
        }
        return len(wanted & found)

    def mark(self) -> None:
        """Start a new request log window (read it with `requests_since_mark`)."""
        self.kube.requests.clear()
        self._runpod_mark = len(self.runpod.requests)

    def requests_since_mark(self) -> RequestLog:
        from reconciler.sim.runpod.gateway import REQUEST_LOG_LIMIT

        runpod = self.runpod.requests
        if len(runpod) >= REQUEST_LOG_LIMIT:
            raise RuntimeError("the RunPod request log overflowed; measure shorter phases")
        return RequestLog(
            kube=list(self.kube.requests),
            runpod=[(r.method, r.path, "", r.status) for r in runpod[self._runpod_mark :]],
        )

    def seed_tick(self, database_url: str, settings: Settings) -> int:
        """One tick of the host's own reconciler (to reach steady state); actions planned."""
        if self._seeder is None:
            self._seeder = MeasuredReconciler(self.urls(), database_url, settings, self.clock)
        return len(self._seeder.tick().actions)

    def drop_seeder(self) -> None:
        if self._seeder is not None:
            self._seeder.close()
            self._seeder = None


def converge(
    host: Any,
    clock: SimClock,
    database_url: str,
    settings: Settings,
    interval: float = 15,
    max_ticks: int = 40,
) -> int:
    """Tick the host's reconciler until a tick plans nothing; returns the ticks used."""
    try:
        for count in range(1, max_ticks + 1):
            if host.seed_tick(database_url, settings) == 0:
                return count
            clock.advance(interval)
    finally:
        host.drop_seeder()
    raise RuntimeError(f"no steady state after {max_ticks} ticks")


class LinkedClock(SimClock):
    """The measuring process's clock: every advance also moves the remote host's clock."""

    def __init__(self, host: Any) -> None:
        super().__init__()
        self._host = host

    def advance(self, seconds: float) -> None:
        super().advance(seconds)
        self._host.advance(seconds)


@dataclass
class Writes:
    """What the store wrote in a stretch of time, in the two units that cost.

    `transactions`: COMMITs of a transaction that wrote at least one row. Each is one
    append and sync point of SQLite's write-ahead log (one round trip and commit on
    PostgreSQL); this is what the targets' "database writes" count. `rows`: rows
    inserted, updated or deleted, by "VERB table" (one statement may write many).
    """

    transactions: int = 0
    rows: Counter[str] = field(default_factory=Counter)


class WriteCounter:
    """Counts the store's write transactions and the rows they write.

    Cursor events see each statement SQLAlchemy sends, with its row count (an UPDATE
    that matches no row still counts once: it was sent); commit events close a
    transaction, which counts when a write statement ran in it.
    """

    def __init__(self, engine: SqlEngine) -> None:
        self._taken = Writes()
        self._dirty = False
        event.listen(engine, "after_cursor_execute", self._seen)
        event.listen(engine, "commit", self._committed)
        event.listen(engine, "rollback", self._rolled_back)

    def _seen(
        self,
        _conn: Any,
        cursor: Any,
        statement: str,
        parameters: Any,
        _context: Any,
        executemany: bool,
    ) -> None:
        words = statement.split()
        verb = words[0].upper() if words else ""
        if verb not in WRITE_VERBS:
            return
        table = words[1] if verb == "UPDATE" else words[2]
        rows = cursor.rowcount
        if rows is None or rows < 0:  # not reported (RETURNING): one per parameter set
            rows = len(parameters) if executemany else 1
        self._taken.rows[f"{verb} {table}"] += max(1, rows)
        self._dirty = True

    def _committed(self, _conn: Any) -> None:
        if self._dirty:
            self._taken.transactions += 1
        self._dirty = False

    def _rolled_back(self, _conn: Any) -> None:
        self._dirty = False

    def take(self) -> Writes:
        taken, self._taken = self._taken, Writes()
        return taken


@dataclass
class MeasuredReconciler:
    """The reconciler under test, wired like `Sandbox.restart` but with counted writes."""

    urls: tuple[str, str]
    database_url: str
    settings: Settings
    clock: SimClock
    writes: WriteCounter = field(init=False)
    engine: Engine = field(init=False)

    def __post_init__(self) -> None:
        runpod_url, kube_url = self.urls
        configuration = kubernetes.client.Configuration(host=kube_url)
        configuration.api_key = {"BearerToken": TOKEN}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        kube = KubeClient(kubernetes.client.ApiClient(configuration), now=self.clock.now)
        self.runpod = RunPodClient(
            API_KEY,
            runpod_url,
            sleep=self.clock.sleep,
            monotonic=self.clock.monotonic,
            read_timeout=60,
        )
        sql = db.make_engine(self.database_url)
        migrate.upgrade(sql)
        self.writes = WriteCounter(sql)
        # The loop's metrics after each tick, as a Deployment serves them.
        metrics = Metrics()
        self.engine, _ = compose(
            self.settings,
            self.runpod,
            kube,
            Store(db.session_factory(sql)),
            self.clock.now,
            RunMode.ONCE,
            after_tick=lambda engine, report: metrics.observe(
                report, engine.runpod.rate_budget, engine.settings.owner_id
            ),
        )

    def tick(self) -> TickReport:
        return self.engine.tick()

    def close(self) -> None:
        self.runpod.close()
        self.engine.kube.close()


class _HostManager(BaseManager):
    pass


_HostManager.register("SimHost", SimHost)


@contextmanager
def local_world(quota: tuple[int, int, int] = DEFAULT_QUOTA) -> Iterator[tuple[Any, SimClock]]:
    """Host in this process (the smoke test): one clock, shared directly."""
    host = SimHost(quota)
    try:
        yield host, host.clock
    finally:
        host.stop()


@contextmanager
def remote_world(quota: tuple[int, int, int] = DEFAULT_QUOTA) -> Iterator[tuple[Any, SimClock]]:
    """Host in a spawned child process; the clock given back keeps both in step."""
    manager = _HostManager(ctx=multiprocessing.get_context("spawn"))
    manager.start()
    try:
        host = manager.SimHost(quota)  # type: ignore[attr-defined]
        try:
            yield host, LinkedClock(host)
        finally:
            host.stop()
    finally:
        manager.shutdown()


def peak_rss_mb() -> float:
    """This process's peak resident set size since it started (Linux: KiB units)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
