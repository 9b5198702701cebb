"""`reconciler sync --once` against the simulators: the summary, --dry-run changing
nothing (also while a loop holds the writer lock), JSON output (also as JSON mode's
default), a clear error when a world cannot be reached, the key never shown, the
caller's SIGTERM handler back in place afterwards, and no kubelet endpoint advertised
(`kubectl logs` fails at once; `reconciler logs` is the way in this mode)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from types import FrameType

import pytest
from click.testing import CliRunner

from reconciler.cli.commands import main
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.runtime.process.wiring import lock_name
from tests.cli.sync_once import sync_once


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        yield sandbox


def sync(box: Sandbox, *args: str, runpod_url: str | None = None) -> tuple[int, str]:
    """Exit code and standard output (log lines go to standard error)."""
    result = sync_once(box, *args, runpod_url=runpod_url)
    assert API_KEY not in result.output  # neither on stdout nor in any log line
    return result.exit_code, result.stdout


def test_one_tick_creates_and_prints_a_summary(box: Sandbox) -> None:
    box.add_pod("train")
    code, output = sync(box)
    assert code == 0, output
    assert "tick #" in output and " ok " in output
    assert "Create" in output
    assert len(box.owned_instances()) == 1


def test_the_sigterm_handler_is_the_callers_again_after_the_tick(box: Sandbox) -> None:
    """`--once` exits through its cleanup on SIGTERM while it ticks, and only then."""

    def callers(_signum: int, _frame: FrameType | None) -> None:
        """The handler of whoever runs the command."""

    previous = signal.signal(signal.SIGTERM, callers)
    try:
        code, output = sync(box)
        assert code == 0, output
        assert signal.getsignal(signal.SIGTERM) is callers
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_dry_run_prints_the_plan_and_changes_nothing(box: Sandbox) -> None:
    box.add_pod("train")
    requests_before = len(box.kube_sim.requests)
    code, output = sync(box, "--dry-run")
    assert code == 0, output
    assert "dry run" in output and "Create" in output and "default/train" in output
    assert box.owned_instances() == []
    writes = [r for r in box.kube_sim.requests[requests_before:] if r[0] != "GET"]
    assert writes == []


def test_dry_run_shows_an_offload_with_its_trigger_and_binds_nothing(box: Sandbox) -> None:
    box.add_pod("burst", bound=False, annotations={"runpod.io/managed": "true"})
    box.kube_sim.make_unschedulable("default", "burst")
    code, output = sync(box, "--dry-run")
    assert code == 0, output
    assert "Bind" in output and "default/burst" in output and "unschedulable for" in output
    assert not (box.pod("burst") or {})["spec"].get("nodeName")


def test_json_output_has_stable_keys(box: Sandbox) -> None:
    box.add_pod("train")
    code, output = sync(box, "--output", "json")
    record = json.loads(output)
    assert code == 0
    assert record["planned"] == {"Create": 1} and record["ok"] is True
    assert set(record) >= {"tick", "pods", "instances", "applied", "failed", "errors"}


def test_unreachable_runpod_fails_the_tick_and_never_shows_the_key(box: Sandbox) -> None:
    code, output = sync(box, "--output", "json", runpod_url="http://127.0.0.1:9")
    assert code == 1
    assert json.loads(output)["ok"] is False
    assert API_KEY not in output


def test_missing_api_key_is_a_one_line_error(box: Sandbox) -> None:
    result = CliRunner().invoke(
        main, ["--database-url", box.database_url, "sync", "--once"], env={"RUNPOD_API_KEY": None}
    )
    assert result.exit_code == 2
    assert "RUNPOD_API_KEY" in result.output


def database_contents(box: Sandbox) -> list[tuple[object, ...]]:
    with sqlite3.connect(box.database_url.removeprefix("sqlite:///")) as connection:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        return [
            (table, *row)
            for table in tables
            for row in connection.execute(f"SELECT * FROM {table}")
        ]


def test_dry_run_works_while_a_loop_holds_the_lock_and_writes_nothing(box: Sandbox) -> None:
    box.add_pod("train")
    holder = "another-host/4242"
    name = lock_name(box.settings.node.name)  # the node's lock
    assert box.store.locks.acquire(name, holder, 600, datetime.now(UTC)) is None
    before = database_contents(box)
    code, output = sync(box, "--dry-run", "--output", "json")
    assert code == 0, output
    assert [step["kind"] for step in json.loads(output)["plan"]].count("Create") == 1
    assert database_contents(box) == before
    assert box.owned_instances() == []
    # The real tick is still refused: the lock keeps two writers apart.
    code, _ = sync(box)
    assert code == 1


def test_json_logs_make_the_summary_json(box: Sandbox) -> None:
    box.add_pod("train")
    result = sync_once(box, global_args=("--log-format", "json"))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["applied"]["Create"] == 1
    for line in result.stderr.splitlines():
        json.loads(line)


def test_cronjob_mode_advertises_no_kubelet_endpoint() -> None:
    """A `--once` run serves no kubelet endpoint and its pod's IP is gone when it ends:
    the node takes back an InternalIP advertised before (by a Deployment), gives port 0
    and says so in its Ready message, and the real `kubectl logs` fails at once with an
    error instead of hanging on an address nothing listens on."""
    with Sandbox(tls=True) as box:
        box.configure(kubelet_address="10.42.0.9")
        box.add_pod("train", command=["python", "train.py"])
        box.tick()  # as a Deployment leader wrote the node
        before = box.kube_sim.get("nodes", None, "virtual-runpod") or {}
        assert before["status"]["addresses"] == [{"type": "InternalIP", "address": "10.42.0.9"}]
        result = sync_once(box, env={"POD_IP": "10.42.0.7"})
        assert result.exit_code == 0, result.output
        node = box.kube_sim.get("nodes", None, "virtual-runpod") or {}
        assert node["status"]["addresses"] == [{"type": "Hostname", "address": "virtual-runpod"}]
        assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True" and "`reconciler logs`" in ready["message"]
        started = time.monotonic()
        done = subprocess.run(
            ["kubectl", "--kubeconfig", box.kubeconfig, "logs", "train"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode != 0 and "virtual-runpod" in done.stderr
        assert time.monotonic() - started < 10


def test_once_without_stay_warns_that_the_node_goes_not_ready(box: Sandbox) -> None:
    result = sync_once(box)
    assert result.exit_code == 0
    assert "--once without --stay" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stay", "40"], "--stay needs --once"),
        (["--once", "--dry-run", "--stay", "40"], "--stay needs --once"),
        (["--once", "--kubelet-address", "my-host"], "'my-host' is not an IP address"),
        (["--once", "--node-cpu", "lots"], "'lots' is not a Kubernetes quantity"),
        (["--once", "--kubelet-port", "70000"], "--kubelet-port"),
        (["--once", "--node-name", "GPU_Node"], "'GPU_Node' is not a DNS subdomain"),
        (["--once", "--node-name", "n" * 247], "at most 246, so its writer Lease's name fits"),
    ],
)
def test_options_that_cannot_work_are_refused(box: Sandbox, args: list[str], message: str) -> None:
    result = CliRunner().invoke(
        main,
        ["--database-url", box.database_url, "sync", "--kubeconfig", box.kubeconfig, *args],
        env={"RUNPOD_API_KEY": API_KEY},
    )
    assert result.exit_code == 2
    assert message in result.output


def test_a_data_center_the_catalog_does_not_offer_is_named_in_a_warning(box: Sandbox) -> None:
    box.add_pod("train")
    result = sync_once(box, "--datacenter-ids", "US-TX-3,US-XX-9")
    assert result.exit_code == 0, result.output
    assert "--datacenter-ids names US-XX-9, where RunPod's GPU catalog offers" in result.stderr
    assert "US-TX-3," not in result.stderr  # the one it offers is not named
    assert len(box.owned_instances()) == 1  # placed in the one that exists
