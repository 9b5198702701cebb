"""`kubectl logs`, `exec`, `cp` and `port-forward` through a real kube-apiserver: it
authenticates to the kubelet endpoint with its client certificate at the address the
virtual node advertises, and translates kubectl's WebSocket to SPDY itself. (`kubectl
top`, through metrics-server: test_top.py.)"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.realk8s.test_pods import gpu_pod
from tests.realk8s.world import World

TRANSPORTS = pytest.mark.parametrize("spdy", [False, True], ids=["websocket", "spdy"])


@pytest.fixture
def running(world: World) -> Iterator[tuple[World, str]]:
    world.apply(gpu_pod("notebook"))
    pod = world.wait_for(
        "the pod to run",
        lambda: (p := world.get("pod", "notebook")) and p["status"].get("phase") == "Running" and p,
    )
    instance = world.instance_for(pod)
    assert instance is not None
    yield world, str(instance["id"])
    world.kubectl("delete", "pod", "notebook", "--timeout=90s", check=False)


def env(spdy: bool) -> dict[str, str]:
    value = "false" if spdy else "true"
    return {
        **os.environ,
        "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": value,
        "KUBECTL_PORT_FORWARD_WEBSOCKETS": value,
    }


def test_kubectl_logs(running: tuple[World, str]) -> None:
    world, instance = running
    world.runpod.logs.write_container(instance, ["epoch 1 loss 0.9", "epoch 2 loss 0.5"])
    shown = world.wait_for(
        "the log lines",
        lambda: (
            (out := world.kubectl("logs", "notebook", check=False).stdout)
            and "epoch 2" in out
            and out
        ),
    )
    assert shown.splitlines()[-2:] == ["epoch 1 loss 0.9", "epoch 2 loss 0.5"]


@TRANSPORTS
def test_kubectl_exec_gives_both_streams_and_the_exit_code(
    running: tuple[World, str], spdy: bool
) -> None:
    world, _ = running
    done = world.kubectl(
        "exec",
        "notebook",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
        check=False,
        env=env(spdy),
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "out\n"
    assert done.stderr.endswith("err\ncommand terminated with exit code 3\n")
    echoed = world.kubectl(
        "exec", "-i", "notebook", "--", "cat", input="data\n", check=False, env=env(spdy)
    )
    assert (echoed.returncode, echoed.stdout) == (0, "data\n"), echoed.stderr


def test_kubectl_cp_round_trips_a_file(running: tuple[World, str], tmp_path: Path) -> None:
    world, instance = running
    source = tmp_path / "weights.txt"
    source.write_text("layer 1\nlayer 2\n")
    world.kubectl("cp", str(source), "notebook:/tmp/weights.txt")
    assert (
        world.runpod.ssh.sandbox(instance) / "tmp" / "weights.txt"
    ).read_text() == "layer 1\nlayer 2\n"
    back = tmp_path / "back.txt"
    world.kubectl("cp", "notebook:/tmp/weights.txt", str(back))
    assert back.read_text() == "layer 1\nlayer 2\n"


@TRANSPORTS
def test_kubectl_port_forward(running: tuple[World, str], spdy: bool) -> None:
    world, instance = running
    world.runpod.ssh.serve_http(instance, 8888, "hello from the notebook")
    config = world.plane.write_admin_kubeconfig(world.plane.workdir / "admin.kubeconfig")
    process = subprocess.Popen(
        ["kubectl", f"--kubeconfig={config}", "port-forward", "notebook", ":8888"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(spdy),
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # Forwarding from 127.0.0.1:PORT -> 8888
        assert "-> 8888" in line, line + (process.stderr.read() if process.stderr else "")
        local = int(line.split("127.0.0.1:")[1].split()[0])
        for _ in range(2):  # two connections over one session
            assert (
                requests.get(f"http://127.0.0.1:{local}/", timeout=30).text
                == "hello from the notebook"
            )
    finally:
        process.terminate()
        process.wait(30)


def test_a_user_without_pods_exec_is_refused(running: tuple[World, str]) -> None:
    world, _ = running
    world.kubectl("create", "serviceaccount", "viewer", check=False)
    world.kubectl(
        "create",
        "rolebinding",
        "viewer",
        "--clusterrole=view",
        "--serviceaccount=default:viewer",
        check=False,
    )
    token = world.kubectl("create", "token", "viewer").stdout.strip()
    done = world.kubectl(f"--token={token}", "exec", "notebook", "--", "true", check=False)
    assert done.returncode != 0
    assert "forbidden" in done.stderr.lower(), done.stderr
