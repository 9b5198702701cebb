"""`kubectl exec` end to end: the real kubectl asks the Kubernetes simulator (TLS), which
checks the request (RBAC on pods/exec, the pod, the command) and proxies the SPDY
upgrade to the virtual node's kubelet endpoint with its kubelet client certificate; the
endpoint runs the command over SSH on the RunPod simulator's sshd. kubectl's default
(WebSocket first, which the simulator declines, then SPDY) and
KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false both print both streams and exit with the
command's code; stdin is echoed; a pod without sshd says so."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import struct
import subprocess
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from reconciler.demo.sandbox import Sandbox

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.enable_ssh(str(tmp_path / "reconciler-ssh-key"))
        sandbox.start_kubelet()
        sandbox.add_pod("train", command=["python", "train.py"])
        sandbox.tick()
        sandbox.advance(30)
        sandbox.tick()
        yield sandbox


def kubectl(
    box: Sandbox, *args: str, stdin: str = "", spdy: bool = False
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if spdy:
        env["KUBECTL_REMOTE_COMMAND_WEBSOCKETS"] = "false"
    return subprocess.run(
        ["kubectl", "--kubeconfig", box.kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("spdy", [False, True], ids=["default", "spdy"])
def test_both_streams_and_the_exit_code(box: Sandbox, spdy: bool) -> None:
    done = kubectl(
        box, "exec", "train", "--", "sh", "-c", "echo out; echo err >&2; exit 3", spdy=spdy
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "out\n"
    assert done.stderr.endswith("err\ncommand terminated with exit code 3\n")


def test_stdin_is_echoed(box: Sandbox) -> None:
    done = kubectl(box, "exec", "-i", "train", "--", "cat", stdin="data\n", spdy=True)
    assert (done.returncode, done.stdout) == (0, "data\n"), done.stderr


def test_a_pod_without_sshd_says_so(box: Sandbox) -> None:
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.set_sshd(instance["id"], False)
    done = kubectl(box, "exec", "train", "--", "true", spdy=True)
    assert done.returncode == 1
    assert "no SSH server answers" in done.stderr and "PUBLIC_KEY" in done.stderr


def test_cp_round_trips_a_file(box: Sandbox, tmp_path: Path) -> None:
    source = tmp_path / "weights.txt"
    source.write_text("layer 1\nlayer 2\n")
    pushed = kubectl(box, "cp", str(source), "train:/tmp/weights.txt", spdy=True)
    assert pushed.returncode == 0, pushed.stderr
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    sandbox = box.runpod_sim.ssh_sandbox(instance["id"])
    assert (sandbox / "tmp" / "weights.txt").read_text() == "layer 1\nlayer 2\n"
    back = tmp_path / "back.txt"
    pulled = kubectl(box, "cp", "train:/tmp/weights.txt", str(back), spdy=True)
    assert pulled.returncode == 0, pulled.stderr
    assert back.read_text() == "layer 1\nlayer 2\n"


def test_exec_it_gets_a_pty_of_the_terminals_size(box: Sandbox) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    env = {**os.environ, "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    process = subprocess.Popen(
        [
            "kubectl",
            "--kubeconfig",
            box.kubeconfig,
            "exec",
            "-it",
            "train",
            "--",
            "sh",
            "-c",
            "stty size; test -t 0 && echo on-a-tty",
        ],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    output = b""
    with contextlib.suppress(OSError):  # EIO once kubectl has exited
        while chunk := os.read(master, 4096):
            output += chunk
    os.close(master)
    assert process.wait(60) == 0, output
    assert b"33 101\r\non-a-tty\r\n" in output


def test_exec_needs_create_on_pods_exec(tmp_path: Path) -> None:
    # everything the sandbox and kubectl touch, but no subresource (so no pods/exec)
    everything = ["namespaces", "pods", "nodes", "events", "configmaps", "secrets", "leases"]
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": "no-exec"},
                    "rules": [{"apiGroups": ["*"], "resources": everything, "verbs": ["*"]}],
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": "dev-no-exec"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "no-exec",
                    },
                    "subjects": [{"kind": "User", "name": "dev"}],
                },
            ]
        )
    )
    with Sandbox(tls=True, rbac_files=(str(rbac),), rbac_subject="dev") as box:
        box.add_pod("train", command=["python", "train.py"])
        done = kubectl(box, "exec", "train", "--", "true", spdy=True)
    assert done.returncode == 1
    assert 'cannot create resource "pods/exec"' in done.stderr


def test_port_forward_serves_the_pods_http(box: Sandbox) -> None:
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.serve_http(instance["id"], 8888, "hello from the notebook")
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "port-forward", "train", ":8888"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # Forwarding from 127.0.0.1:PORT -> 8888
        assert "-> 8888" in line, line + (process.stderr.read() if process.stderr else "")
        local = int(line.split("127.0.0.1:")[1].split()[0])
        for _ in range(2):  # two connections over one session
            answer = requests.get(f"http://127.0.0.1:{local}/", timeout=30)
            assert answer.text == "hello from the notebook"
    finally:
        process.terminate()
        process.wait(30)


def test_port_forward_to_a_closed_port_says_so(box: Sandbox) -> None:
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "port-forward", "train", ":9999"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        local = int(line.split("127.0.0.1:")[1].split()[0])
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{local}/", timeout=30)
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    assert "error forwarding port 9999 to pod train" in errors
