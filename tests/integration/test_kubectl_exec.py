"""`kubectl exec`, `cp` and `port-forward` end to end: the real kubectl asks the
Kubernetes simulator (TLS), which checks the request (RBAC on pods/exec, the pod, the
command) and speaks SPDY to the virtual node's kubelet endpoint with its kubelet client
certificate; the endpoint runs the command over SSH on the RunPod simulator's sshd.

Each behaviour is checked over both of kubectl's transports: its default, WebSocket
(`v5.channel.k8s.io`, translated to SPDY by the simulator as kube-apiserver does; SPDY
tunnelled in a WebSocket for port-forward), and SPDY itself
(KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false). Both streams and the exit code, stdin, a tty
of the terminal's size, cp both ways, port-forward; that the default really is
WebSocket (no fallback); a pod without sshd says so; RBAC."""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import shutil
import socket
import ssl
import struct
import subprocess
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from reconciler.demo.sandbox import Sandbox

TRANSPORTS = pytest.mark.parametrize("spdy", [False, True], ids=["websocket", "spdy"])

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


def kubectl_env(spdy: bool) -> dict[str, str]:
    # Both switches: exec and cp read the first, port-forward the second.
    value = "false" if spdy else "true"
    return {
        **os.environ,
        "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": value,
        "KUBECTL_PORT_FORWARD_WEBSOCKETS": value,
    }


def kubectl(
    box: Sandbox, *args: str, stdin: str = "", spdy: bool = False
) -> subprocess.CompletedProcess[str]:
    env = kubectl_env(spdy)
    return subprocess.run(
        ["kubectl", "--kubeconfig", box.kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@TRANSPORTS
def test_both_streams_and_the_exit_code(box: Sandbox, spdy: bool) -> None:
    done = kubectl(
        box, "exec", "train", "--", "sh", "-c", "echo out; echo err >&2; exit 3", spdy=spdy
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "out\n"
    assert done.stderr.endswith("err\ncommand terminated with exit code 3\n")


@TRANSPORTS
def test_stdin_is_echoed(box: Sandbox, spdy: bool) -> None:
    done = kubectl(box, "exec", "-i", "train", "--", "cat", stdin="data\n", spdy=spdy)
    assert (done.returncode, done.stdout) == (0, "data\n"), done.stderr


@TRANSPORTS
def test_a_pod_without_sshd_says_so(box: Sandbox, spdy: bool) -> None:
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.ssh.set_running(instance["id"], False)
    done = kubectl(box, "exec", "train", "--", "true", spdy=spdy)
    assert done.returncode == 1
    assert "no SSH server answers" in done.stderr and "PUBLIC_KEY" in done.stderr


@TRANSPORTS
def test_cp_round_trips_a_file(box: Sandbox, tmp_path: Path, spdy: bool) -> None:
    source = tmp_path / "weights.txt"
    source.write_text("layer 1\nlayer 2\n")
    pushed = kubectl(box, "cp", str(source), "train:/tmp/weights.txt", spdy=spdy)
    assert pushed.returncode == 0, pushed.stderr
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    sandbox = box.runpod_sim.ssh.sandbox(instance["id"])
    assert (sandbox / "tmp" / "weights.txt").read_text() == "layer 1\nlayer 2\n"
    back = tmp_path / "back.txt"
    pulled = kubectl(box, "cp", "train:/tmp/weights.txt", str(back), spdy=spdy)
    assert pulled.returncode == 0, pulled.stderr
    assert back.read_text() == "layer 1\nlayer 2\n"


@TRANSPORTS
def test_exec_it_gets_a_pty_of_the_terminals_size(box: Sandbox, spdy: bool) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    env = kubectl_env(spdy)
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


def rbac_sandbox(tmp_path: Path, exec_verbs: list[str]) -> Sandbox:
    """A sandbox whose kubectl user may do everything the tests touch, and on pods/exec
    only `exec_verbs`."""
    everything = ["namespaces", "pods", "nodes", "events", "configmaps", "secrets", "leases"]
    rules = [{"apiGroups": ["*"], "resources": everything, "verbs": ["*"]}]
    if exec_verbs:
        rules.append({"apiGroups": [""], "resources": ["pods/exec"], "verbs": exec_verbs})
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": "dev"},
                    "rules": rules,
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": "dev"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "dev",
                    },
                    "subjects": [{"kind": "User", "name": "dev"}],
                },
            ]
        )
    )
    return Sandbox(tls=True, rbac_files=(str(rbac),), rbac_subject="dev")


@TRANSPORTS
def test_exec_needs_create_on_pods_exec(tmp_path: Path, spdy: bool) -> None:
    with rbac_sandbox(tmp_path, []) as box:
        box.add_pod("train", command=["python", "train.py"])
        done = kubectl(box, "exec", "train", "--", "true", spdy=spdy)
    assert done.returncode == 1
    assert 'cannot create resource "pods/exec"' in done.stderr


def test_a_websocket_exec_needs_create_as_well_as_get(tmp_path: Path) -> None:
    # kube-apiserver 1.32 authorizes the WebSocket's GET as `get`; 1.35+ also asks for
    # `create`. The simulator asks both, so `get` alone is refused.
    with rbac_sandbox(tmp_path, ["get"]) as box:
        box.add_pod("train", command=["python", "train.py"])
        with pytest.raises(InvalidStatus) as refused:
            websocket_exec(box, ["v5.channel.k8s.io"])
    assert refused.value.response.status_code == 403
    assert b'cannot create resource \\"pods/exec\\"' in refused.value.response.body


def websocket_exec(box: Sandbox, protocols: list[str]) -> None:
    """Open a WebSocket exec as a client offering `protocols` would."""
    with open(box.kubeconfig) as file:
        config = yaml.safe_load(file)
    server = config["clusters"][0]["cluster"]["server"].replace("https://", "wss://")
    token = config["users"][0]["user"]["token"]
    context = ssl.create_default_context(cafile=box.kube_sim.ca_cert_path)
    url = f"{server}/api/v1/namespaces/default/pods/train/exec?command=true&stdout=true"
    with connect(
        url,
        ssl=context,
        subprotocols=[Subprotocol(p) for p in protocols],
        additional_headers={"Authorization": f"Bearer {token}"},
        open_timeout=30,
    ):
        pass


def test_the_default_transport_is_websocket_with_no_fallback(box: Sandbox) -> None:
    # A simulator that refused the WebSocket would still see kubectl succeed, by falling
    # back to SPDY: only the requests it got tell the two apart.
    done = kubectl(box, "exec", "train", "--", "true")
    assert done.returncode == 0, done.stderr
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.ssh.serve_http(instance["id"], 8888, "hello")
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "port-forward", "train", ":8888"],
        stdout=subprocess.PIPE,
        text=True,
        env=kubectl_env(False),
    )
    try:
        assert process.stdout is not None
        local = int(process.stdout.readline().split("127.0.0.1:")[1].split()[0])
        assert requests.get(f"http://127.0.0.1:{local}/", timeout=30).text == "hello"
    finally:
        process.terminate()
        process.wait(30)
    streaming = [
        (method, path.rsplit("/", 1)[1], status)
        for method, path, _, status in box.kube_sim.requests
        if path.endswith(("/pods/train/exec", "/pods/train/portforward"))
    ]
    assert streaming == [("GET", "exec", 101), ("GET", "portforward", 101)]


def test_an_older_websocket_goes_to_the_kubelet_which_refuses_it(box: Sandbox) -> None:
    # Only v5 is translated; kube-apiserver proxies any other WebSocket to the kubelet as
    # it came, and ours speaks SPDY only.
    with pytest.raises(InvalidStatus) as refused:
        websocket_exec(box, ["v4.channel.k8s.io"])
    assert refused.value.response.status_code == 400
    assert b"missing upgrade headers in request (SPDY/3.1)" in refused.value.response.body


@TRANSPORTS
def test_port_forward_serves_the_pods_http(box: Sandbox, spdy: bool) -> None:
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.ssh.serve_http(instance["id"], 8888, "hello from the notebook")
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "port-forward", "train", ":8888"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=kubectl_env(spdy),
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


@TRANSPORTS
def test_a_session_that_breaks_mid_command_is_a_failure_not_success(
    box: Sandbox, spdy: bool
) -> None:
    """The connection to the instance drops while the command runs (no exit status ever
    comes): kubectl must not report success, or `kubectl exec ... && next` goes on."""
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    process = subprocess.Popen(
        [
            "kubectl",
            "--kubeconfig",
            box.kubeconfig,
            "exec",
            "train",
            "--",
            "sh",
            "-c",
            "echo started; sleep 30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=kubectl_env(spdy),
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "started\n"
    box.runpod_sim.ssh.break_connections(instance["id"])
    _, stderr = process.communicate(timeout=20)
    assert process.returncode != 0, stderr
    assert "the SSH session to the instance broke" in stderr


def _forwarding(box: Sandbox, port: int, spdy: bool) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "port-forward", "train", f":{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=kubectl_env(spdy),
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert f"-> {port}" in line, line
    return process, int(line.split("127.0.0.1:")[1].split()[0])


def _read_to_end(sock: socket.socket) -> bytes:
    sock.settimeout(20)  # a close that is never passed on fails here, not forever
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


@TRANSPORTS
def test_port_forward_passes_the_pods_close_to_the_client(box: Sandbox, spdy: bool) -> None:
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.ssh.serve_http(instance["id"], 8888, "done")
    process, local = _forwarding(box, 8888, spdy)
    try:
        with socket.create_connection(("127.0.0.1", local), timeout=20) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert _read_to_end(sock).endswith(b"\r\n\r\ndone")
    finally:
        process.terminate()
        process.wait(30)


@TRANSPORTS
def test_port_forward_passes_the_clients_half_close_to_the_pod(box: Sandbox, spdy: bool) -> None:
    # As `nc -N` uploads a file: send, end input, then read the answer.
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.ssh.serve_count(instance["id"], 9000)
    process, local = _forwarding(box, 9000, spdy)
    try:
        with socket.create_connection(("127.0.0.1", local), timeout=20) as sock:
            sock.sendall(b"x" * 100_000)
            sock.shutdown(socket.SHUT_WR)
            assert _read_to_end(sock) == b"100000 bytes"
    finally:
        process.terminate()
        process.wait(30)


def test_each_pod_shows_its_instances_public_ip_and_exec_reaches_it(box: Sandbox) -> None:
    """A pod's host IP is the public IP RunPod reports for its instance (the simulator's
    are not loopback, so an address taken from anywhere else shows), one per pod, and it
    has no pod IP (the EndpointSlice controller would publish one with the container's
    port, which RunPod maps elsewhere); exec goes to that address (through the
    simulator's network, as the wiring says)."""
    box.add_pod("eval", command=["python", "eval.py"])
    box.tick()
    box.advance(30)
    box.tick()
    columns = "custom-columns=NAME:.metadata.name,HOST:.status.hostIP,IP:.status.podIP"
    table = kubectl(box, "get", "pods", "-o", columns, "--no-headers")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split()[1:] for line in table.stdout.splitlines()}
    assert set(rows) == {"train", "eval"}
    ips = {name: host for name, (host, _pod_ip) in rows.items()}
    assert all(pod_ip == "<none>" for _host, pod_ip in rows.values()), rows
    assert ips["train"] != ips["eval"]
    for name, ip in ips.items():
        instance = box.instance_for(box.pod(name) or {})
        assert instance is not None
        assert ip == instance["runtime"]["ports"][0]["ip"]
        assert not ipaddress.ip_address(ip).is_loopback
        done = kubectl(box, "exec", name, "--", "hostname")
        assert done.returncode == 0, done.stderr
    described = kubectl(box, "describe", "pod", "eval")
    assert f"virtual-runpod/{ips['eval']}" in described.stdout, described.stdout
