"""`reconciler sync` as a real process against the simulators: /healthz, /readyz and
/metrics answer, a new pod reaches RunPod on the next tick, SIGTERM exits cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from reconciler.sim.sandbox import API_KEY, Sandbox


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def eventually(check: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def answers(url: str, status: int = 200) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == status
    except requests.ConnectionError:
        return False


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[tuple[Sandbox, subprocess.Popen[str], str]]:
    with Sandbox() as box:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "--database-url",
             f"sqlite:///{tmp_path / 'loop.db'}", "sync", "--interval", "1",
             "--health-address", f"127.0.0.1:{port}", "--kubeconfig", box.kubeconfig,
             "--runpod-url", box.runpod_sim.base_url],
            env={**os.environ, "RUNPOD_API_KEY": API_KEY}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            yield box, process, f"http://127.0.0.1:{port}"
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_loop_serves_health_ticks_and_stops_on_sigterm(
        loop: tuple[Sandbox, subprocess.Popen[str], str]) -> None:
    box, process, base = loop
    eventually(lambda: answers(f"{base}/healthz"))
    eventually(lambda: answers(f"{base}/readyz"))
    box.add_pod("late")
    eventually(lambda: box.instance_for(box.pod("late") or {}) is not None, seconds=5)
    metrics = requests.get(f"{base}/metrics", timeout=1).text
    assert "reconciler_ticks_total" in metrics
    assert "reconciler_tick_duration_seconds_bucket" in metrics
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=15) == 0
    output = process.stdout.read() if process.stdout else ""
    assert "stopped cleanly" in output and API_KEY not in output
