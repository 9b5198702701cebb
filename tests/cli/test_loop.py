"""`reconciler sync` as a real process against the simulators on 127.0.0.1:
- /healthz, /readyz and /metrics (with the metric names dashboards rely on) answer;
- the pod watch brings a new pod to RunPod within 2 s although the periodic tick is a
  minute away, and the node heartbeat runs without any tick;
- SIGTERM exits 0 and hands the leader Lease back; during a tick, it lets the tick
  finish (a create whose answer comes after the signal is recorded), then releases the
  database lock;
- with two replicas and --leader-elect only the leader acts; when it is killed -9 the
  standby takes over within one lease plus one retry period and reconciles a new pod;
- the kubelet endpoint: the leader serves pod logs and advertises itself on the node, a
  standby answers 503 with a sentence, a caller without credentials 401.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.demo.sandbox import TOKEN as KUBE_TOKEN
from reconciler.runtime.process.wiring import LOCK_TTL, lock_name, open_store

LEASE_NAMESPACE = "runpod-system"
LEASE_NAME = "runpod-reconciler-leader"
LEASE_SECONDS = 6
# A dead leader's Lease runs out at most a lease after its last renewal, and a standby
# tries every retry period, a third of the lease (runtime/process/leader.py).
TAKEOVER_SECONDS = LEASE_SECONDS + LEASE_SECONDS / 3
# Two processes on a shared machine: their own start of a try can come this much late.
SCHEDULING_SLACK = 1.0
# Long enough that only the watch can explain a tick during a test.
LONG_INTERVAL = "60"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def eventually(check: Callable[[], bool], seconds: float = 20) -> float:
    """Seconds it took until `check` held; fails after `seconds`."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < seconds, "condition not reached in time"
        time.sleep(0.05)
    return time.monotonic() - started


def answers(url: str, status: int = 200) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == status
    except requests.ConnectionError:
        return False


class Reconciler:
    """One `reconciler sync` process; its output goes to a file, read at the end."""

    def __init__(self, box: Sandbox, database: Path, log: Path, *args: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.kubelet_port = free_port()
        self.log = log
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "reconciler",
                    "--database-url",
                    f"sqlite:///{database}",
                    "sync",
                    "--health-address",
                    f"127.0.0.1:{self.port}",
                    "--kubelet-port",
                    str(self.kubelet_port),
                    "--kubelet-address",
                    "127.0.0.1",
                    "--kubeconfig",
                    box.kubeconfig,
                    "--runpod-url",
                    box.runpod_sim.base_url,
                    *args,
                ],
                env={**os.environ, "RUNPOD_API_KEY": API_KEY, "RECONCILER_LOG_LEVEL": "DEBUG"},
                text=True,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def metrics(self) -> str:
        return requests.get(f"{self.base}/metrics", timeout=2).text

    def metric(self, line_start: str) -> float | None:
        for line in self.metrics().splitlines():
            if line.startswith(line_start + " "):
                return float(line.split()[-1])
        return None

    def output(self) -> str:
        return self.log.read_text()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        sandbox.ensure_namespace(LEASE_NAMESPACE)
        yield sandbox


@pytest.fixture
def start(box: Sandbox, tmp_path: Path) -> Iterator[Callable[..., Reconciler]]:
    started: list[Reconciler] = []

    def launch(*args: str) -> Reconciler:
        process = Reconciler(box, tmp_path / "loop.db", tmp_path / f"r{len(started)}.log", *args)
        started.append(process)
        return process

    yield launch
    for process in started:
        process.kill()


def lease(box: Sandbox) -> dict[str, Any]:
    return (box.kube_sim.get("leases", LEASE_NAMESPACE, LEASE_NAME) or {}).get("spec") or {}


def creates(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods"))


def has_instance(box: Sandbox, name: str) -> bool:
    return box.instance_for(box.pod(name) or {"metadata": {"uid": "-"}}) is not None


def test_watch_heartbeat_health_metrics_and_sigterm(
    box: Sandbox, start: Callable[..., Reconciler]
) -> None:
    reconciler = start(
        "--interval",
        LONG_INTERVAL,
        "--heartbeat-interval",
        "1",
        "--leader-elect",
        "--leader-elect-lease-duration",
        str(LEASE_SECONDS),
    )
    eventually(lambda: answers(f"{reconciler.base}/healthz"))
    eventually(lambda: answers(f"{reconciler.base}/readyz"))
    eventually(lambda: reconciler.metric('reconciler_ticks_total{result="ok"}') == 1)

    box.add_pod("late")
    latency = eventually(lambda: has_instance(box, "late"), seconds=2)
    print(f"pod to RunPod instance through the watch: {latency:.2f} s")
    assert (reconciler.metric("reconciler_early_ticks_total") or 0) >= 1  # the watch asked

    # Offload through the watches: the scheduler gives up on a managed pod, the pending
    # watch asks for a tick that binds it, the node watch for one that creates it.
    box.add_pod("burst", bound=False, annotations={"runpod.io/managed": "true"})
    time.sleep(3)  # the ticks asked for so far found nothing to do here
    box.kube_sim.make_unschedulable("default", "burst")
    latency = eventually(lambda: has_instance(box, "burst"), seconds=5)
    print(f"unschedulable pod to RunPod instance through the watches: {latency:.2f} s")

    # Heartbeats go on between ticks: the node Lease is renewed again and again.
    node_lease = box.kube_sim.get("leases", "kube-node-lease", box.settings.node.name) or {}
    first = node_lease["spec"]["renewTime"]
    eventually(
        lambda: (
            (box.kube_sim.get("leases", "kube-node-lease", box.settings.node.name) or {})["spec"][
                "renewTime"
            ]
            != first
        ),
        seconds=5,
    )
    assert (reconciler.metric('reconciler_node_heartbeats_total{result="ok"}') or 0) >= 2

    metrics = reconciler.metrics()
    for name in (
        "reconciler_tick_duration_seconds_bucket",
        "reconciler_ticks_total",
        'reconciler_runpod_requests_total{method="POST",route="/v2/pods",status="201"}',
        "reconciler_owned_cost_per_hour_usd",
        "reconciler_orphans_found_total",
        "reconciler_orphans_terminated_total",
        "reconciler_duplicates_healed_total",
        "reconciler_pod_pending_to_running_seconds_bucket",
        "reconciler_leader 1.0",
    ):
        assert name in metrics, name
    assert lease(box).get("holderIdentity")

    reconciler.process.send_signal(signal.SIGTERM)
    assert reconciler.process.wait(timeout=15) == 0
    output = reconciler.output()
    assert "stopped cleanly" in output and API_KEY not in output
    assert not lease(box).get("holderIdentity")  # handed back, not left to expire


def released_while_creating(database: Path) -> bool:
    """Whether the writer lock is free while a create is still open in the journal
    (read without taking anything: the reconciler writes on)."""
    with contextlib.closing(sqlite3.connect(database, timeout=5)) as sql:
        held = sql.execute("SELECT count(*) FROM locks").fetchone()[0]
        open_creates = sql.execute(
            "SELECT count(*) FROM actions WHERE kind = 'create' AND finished_at IS NULL"
        ).fetchone()[0]
    return not held and bool(open_creates)


def test_sigterm_during_a_tick_lets_it_finish_and_releases_the_lock(
    box: Sandbox, start: Callable[..., Reconciler], tmp_path: Path
) -> None:
    reconciler = start("--interval", LONG_INTERVAL)
    eventually(lambda: answers(f"{reconciler.base}/healthz"))
    eventually(lambda: reconciler.metric('reconciler_ticks_total{result="ok"}') == 1)
    box.runpod_sim.faults.create_then_hang(seconds=3)
    box.add_pod("slow")
    eventually(lambda: bool(box.owned_instances()), seconds=10)  # made; the answer stalls
    reconciler.process.send_signal(signal.SIGTERM)
    database = tmp_path / "loop.db"
    # Until it exits, the lock is held for as long as the create's answer is awaited.
    while reconciler.process.poll() is None:
        assert not released_while_creating(database), "lock released before the tick's end"
        time.sleep(0.05)
    assert reconciler.process.returncode == 0
    assert "stopped cleanly" in reconciler.output()
    store = open_store(f"sqlite:///{database}", upgrade=False)
    # The tick went on after the signal: the create's answer came and was recorded.
    [instance] = box.owned_instances()
    [row] = store.load_rows()
    assert row.instance_id == instance["id"]
    [create] = [entry for entry in store.journal() if entry.kind == "create"]
    assert create.outcome == "ok" and create.finished_at is not None
    # And the lock is free: another writer takes it at once.
    name = lock_name(box.settings.node.name)
    assert store.locks.acquire(name, "next-writer", LOCK_TTL, box.clock.now()) is None


def test_only_the_leader_acts_and_a_standby_takes_over_when_it_dies(
    box: Sandbox, start: Callable[..., Reconciler]
) -> None:
    grace = 20
    args = (
        "--interval",
        "1",
        "--leader-elect",
        "--leader-elect-lease-duration",
        str(LEASE_SECONDS),
        "--create-grace-time",
        str(grace),
    )
    a = start(*args)
    eventually(lambda: answers(f"{a.base}/readyz"))
    b = start(*args)
    eventually(lambda: answers(f"{b.base}/readyz"))  # a standby is ready: rollouts go on
    assert b.metric("reconciler_leader") == 0.0

    box.add_pod("first")
    eventually(lambda: has_instance(box, "first"), seconds=5)
    eventually(lambda: (a.metric('reconciler_ticks_total{result="ok"}') or 0) >= 3)
    assert a.metric("reconciler_leader") == 1.0
    assert b.metric('reconciler_ticks_total{result="ok"}') is None
    assert (
        b.metric('reconciler_runpod_requests_total{method="GET",route="/v2/pods",status="200"}')
        is None
    )
    assert creates(box) == 1
    assert lease(box)["holderIdentity"].endswith(f"/{a.process.pid}")

    a.process.send_signal(signal.SIGKILL)
    a.process.wait()
    box.add_pod("second")
    took_over = eventually(
        lambda: lease(box)["holderIdentity"].endswith(f"/{b.process.pid}"), seconds=30
    )
    assert took_over <= TAKEOVER_SECONDS + SCHEDULING_SLACK, took_over
    # Creates wait the create grace from the takeover (the dead leader may have had a
    # create in flight that RunPod's list shows only that late, see
    # runtime/process/writer_lease.py), and no longer.
    eventually(lambda: has_instance(box, "second"), seconds=grace + 15)
    assert b.metric("reconciler_leader") == 1.0
    assert creates(box) == 2  # nothing created twice across the takeover
    assert "taking over the lock of" in b.output()


ADMIN = {"Authorization": f"Bearer {KUBE_TOKEN}"}


def logs_url(replica: Reconciler, pod: str) -> str:
    return f"https://127.0.0.1:{replica.kubelet_port}/containerLogs/default/{pod}/main"


def get(url: str, headers: dict[str, str] | None = None) -> requests.Response:
    return requests.get(url, headers=headers, verify=False, timeout=10)


# These calls play the API server, which does not verify a kubelet's serving certificate
# unless started with --kubelet-certificate-authority (self-signed here).
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_the_leader_serves_logs_and_a_standby_says_so(
    box: Sandbox, start: Callable[..., Reconciler]
) -> None:
    args = ("--interval", "1", "--leader-elect", "--leader-elect-lease-duration", "6")
    leader = start(*args)
    eventually(
        lambda: (
            leader.metric("reconciler_leader") == 1.0 if answers(f"{leader.base}/readyz") else False
        )
    )
    standby = start(*args)
    eventually(lambda: answers(f"{standby.base}/readyz"))

    box.add_pod("p", command=["python", "x.py"])
    eventually(lambda: box.instance_for(box.pod("p") or {}) is not None, seconds=10)
    node = box.kube_sim.get("nodes", None, box.settings.node.name) or {}
    assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == leader.kubelet_port
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "127.0.0.1"}]

    assert get(logs_url(leader, "p")).status_code == 401
    refused = get(logs_url(standby, "p"), ADMIN)
    assert refused.status_code == 503 and "standby" in refused.text
    instance = box.instance_for(box.pod("p") or {}) or {}
    box.advance(30)
    box.runpod_sim.logs.write_container(str(instance["id"]), ["hello"])
    eventually(lambda: get(logs_url(leader, "p"), ADMIN).text.endswith("hello\n"))
