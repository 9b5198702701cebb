"""The simulated pods' sshd, checked with OpenSSH's own client (a third SSH
implementation beside the simulator's asyncssh and the product's paramiko): a pod
created with `startSsh` and a `PUBLIC_KEY` accepts that key for root once RUNNING, and
its `ssh.direct` block leads there only then and only with 22/tcp published; commands
run in the pod's sandbox (`/tmp` inside it), with exit codes, stdin and its end, a pty
when asked; input and output nobody reads wait in the command's pipes, not the
simulator's memory (the channel's window, as OpenSSH's); direct-tcpip reaches what
`serve` set up and nothing else; the admin routes stop the sshd and bring it back with
a new host key; a pod without `startSsh`, or without a key, runs none."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import requests

from reconciler.sim.runpod.net import PROXY_COMMAND
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, RTX_4090

TEST_NET_3 = ipaddress.ip_network("203.0.113.0/24")

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def create(sim: RunPodSimulator, key: Path, **fields: Any) -> dict[str, Any]:
    body = {
        "name": "ssh-pod",
        "image": "img:1",
        "gpu": {"id": RTX_4090},
        "startSsh": True,
        "ports": ["22/tcp"],
        "env": {"PUBLIC_KEY": key.with_suffix(".pub").read_text()},
        **fields,
    }
    answer = requests.post(
        f"{sim.base_url}/v2/pods",
        json=body,
        timeout=5,
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def running(sim: RunPodSimulator, key: Path, **fields: Any) -> dict[str, Any]:
    pod = create(sim, key, **fields)
    sim.advance(60)
    return sim.instances[pod["id"]]


def ssh(
    pod: dict[str, Any], key: Path, *args: str, stdin: str = "", known_hosts: Path | None = None
) -> subprocess.CompletedProcess[str]:
    direct = pod["ssh"]["direct"]
    known = known_hosts or key.parent / "known_hosts"
    return subprocess.run(
        [
            "ssh",
            "-i",
            str(key),
            "-p",
            str(direct["port"]),
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={known}",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "LogLevel=ERROR",
            "-o",
            f"ProxyCommand={PROXY_COMMAND}",
            f"{direct['username']}@{direct['host']}",
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_direct_appears_once_running_and_leads_to_the_pods_sshd(sim, key):
    pod = create(sim, key)
    assert pod["ssh"]["direct"] is None  # still provisioning
    sim.advance(60)
    pod = sim.instances[pod["id"]]
    # The address of a machine of its own, as RunPod shows (reached through the relay).
    assert ipaddress.ip_address(pod["ssh"]["direct"]["host"]) in TEST_NET_3
    assert pod["ssh"]["direct"]["username"] == "root"
    done = ssh(pod, key, "sh", "-c", "'echo out; echo err >&2; exit 3'")
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_commands_run_in_the_pods_sandbox(sim, key):
    pod = running(sim, key)
    assert ssh(pod, key, "echo hello > /tmp/note").returncode == 0
    assert (sim.ssh.sandbox(pod["id"]) / "tmp" / "note").read_text() == "hello\n"
    listing = ssh(pod, key, "tar cf - /tmp/note | tar tf -")
    assert listing.stdout == "tmp/note\n"  # as tar names a container's /tmp/note


def test_stdin_reaches_the_command_and_its_end_is_seen(sim, key):
    pod = running(sim, key)
    assert ssh(pod, key, "cat; echo '[end]'", stdin="data\n").stdout == "data\n[end]\n"


def test_a_pty_when_asked(sim, key):
    pod = running(sim, key)
    done = ssh(pod, key, "-tt", "test -t 0 && echo tty")
    assert done.stdout.replace("\r", "") == "tty\n"
    assert ssh(pod, key, "test -t 0 || echo pipe").stdout == "pipe\n"


def test_forwarding_reaches_a_served_port_and_nothing_else(sim, key):
    pod = running(sim, key)
    sim.ssh.serve_http(pod["id"], 8888, "notebook")
    answer = ssh(pod, key, "-W", "localhost:8888", stdin="GET / HTTP/1.0\r\n\r\n")
    assert answer.stdout.startswith("HTTP/1.1 200 OK")
    assert answer.stdout.endswith("notebook")
    refused = ssh(pod, key, "-W", "localhost:9999", stdin="")
    assert refused.returncode != 0


def test_another_key_or_user_is_refused(sim, key, tmp_path):
    pod = running(sim, key)
    direct = dict(pod["ssh"]["direct"], username="ubuntu")
    assert ssh({"ssh": {"direct": direct}}, key, "true").returncode == 255
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    assert ssh(pod, other, "true").returncode == 255


def test_the_admin_routes_stop_the_sshd_and_bring_it_back_with_a_new_host_key(sim, key):
    pod = running(sim, key)
    assert ssh(pod, key, "true").returncode == 0
    url = f"{sim.base_url}/_sim/pods/{pod['id']}/sshd"
    assert requests.post(url, json={"running": False}, timeout=5).status_code == 204
    assert sim.instances[pod["id"]]["ssh"]["direct"] is not None  # still published
    assert "refused" in ssh(pod, key, "true").stderr
    old = sim.ssh.host_key(pod["id"])
    body = {"running": True, "newHostKey": True}
    assert requests.post(url, json=body, timeout=5).status_code == 204
    assert sim.ssh.host_key(pod["id"]) != old
    changed = ssh(pod, key, "true")
    assert changed.returncode == 255
    assert "HOST IDENTIFICATION HAS CHANGED" in changed.stderr


def test_the_serve_route_sets_up_a_port(sim, key):
    pod = running(sim, key)
    url = f"{sim.base_url}/_sim/pods/{pod['id']}/serve"
    assert requests.post(url, json={"port": 8888, "body": "hi"}, timeout=5).status_code == 204
    answer = ssh(pod, key, "-W", "localhost:8888", stdin="GET / HTTP/1.0\r\n\r\n")
    assert answer.stdout.endswith("hi")
    assert requests.post(url, json={"port": "8888"}, timeout=5).status_code == 400


def test_no_sshd_without_start_ssh_or_a_key(sim, key):
    without_flag = running(sim, key, startSsh=False)
    without_key = running(sim, key, env={})
    for pod in (without_flag, without_key):
        assert pod["ssh"]["direct"]["host"] != "127.0.0.1"  # an address, but no sshd here
        with pytest.raises(ValueError, match="runs no sshd"):
            sim.ssh.sandbox(pod["id"])


def test_no_direct_without_22_published(sim, key):
    pod = running(sim, key, ports=["8888/http"])
    assert pod["ssh"]["direct"] is None


def test_a_stopped_pod_drops_the_connection(sim, key):
    pod = running(sim, key)
    direct = pod["ssh"]
    requests.post(
        f"{sim.base_url}/v2/pods/{pod['id']}/action",
        json={"action": "stop"},
        timeout=5,
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert sim.instances[pod["id"]]["ssh"]["direct"] is None
    assert ssh({"ssh": direct}, key, "true").returncode == 255


def test_deleting_the_pod_removes_its_sandbox(sim, key):
    pod = running(sim, key)
    sandbox = sim.ssh.sandbox(pod["id"])
    requests.delete(
        f"{sim.base_url}/v2/pods/{pod['id']}",
        timeout=5,
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert not sandbox.exists()


def test_a_network_volume_keeps_what_one_pod_wrote_for_the_next(sim, key):
    volume = sim.add_volume("ckpt", 10, "EU-RO-1")
    mounts = {"network": [{"volumeId": volume.id, "path": "/workspace"}]}
    writer = running(sim, key, mounts=mounts)
    assert ssh(writer, key, "echo step-100 > /workspace/ckpt").returncode == 0
    assert (sim.volume_directory(volume.id) / "ckpt").read_text() == "step-100\n"
    assert writer["dataCenterId"] == "EU-RO-1"
    requests.delete(
        f"{sim.base_url}/v2/pods/{writer['id']}",
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=5,
    )
    deep = {"network": [{"volumeId": volume.id, "path": "/mnt/data"}]}
    reader = running(sim, key, mounts=deep)
    assert ssh(reader, key, "cat /mnt/data/ckpt").stdout == "step-100\n"
    plain = running(sim, key)
    assert ssh(plain, key, "cat /workspace/ckpt").returncode != 0  # not mounted there


def _paramiko(pod: dict[str, Any], key: Path) -> Any:
    import paramiko

    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    direct = pod["ssh"]["direct"]
    proxy = paramiko.ProxyCommand(
        PROXY_COMMAND.replace("%h", direct["host"]).replace("%p", str(direct["port"]))
    )
    client.connect(
        direct["host"],
        direct["port"],
        "root",
        key_filename=str(key),
        look_for_keys=False,
        sock=proxy,
    )
    return client


def test_a_key_line_with_options_is_accepted(sim, key):
    public = key.with_suffix(".pub").read_text().strip()
    lines = f'# ours\ncommand="echo hi there",no-pty {public}\nnot a key at all\n'
    pod = running(sim, key, env={"PUBLIC_KEY": lines})
    done = ssh(pod, key, "echo", "in")
    assert done.returncode == 0 and done.stdout == "in\n", done.stderr


def test_input_nobody_reads_stops_being_taken_in(sim, key):
    """As a real sshd: the channel's window closes; the simulator does not grow."""
    pod = running(sim, key)
    client = _paramiko(pod, key)
    channel = client.get_transport().open_session()
    channel.exec_command("sleep 30")
    channel.settimeout(2)
    taken, block = 0, b"x" * 65536
    try:
        while taken < 64 << 20:
            taken += channel.send(block)
    except TimeoutError:
        pass
    client.close()
    assert taken < 8 << 20, f"{taken >> 20} MiB taken in by a command that reads nothing"


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
def test_output_nobody_reads_stops_being_read_from_the_command(sim, key, pty):
    """As a real sshd: once the client's window is full, the command's output waits in
    its pipe (the command blocks), not in the simulator's memory. Twelve stalled `yes`
    sessions once grew it by gigabytes."""
    pod = running(sim, key)
    client = _paramiko(pod, key)
    channels = []
    for _ in range(12):
        channel = client.get_transport().open_session(window_size=65536)
        if pty:
            channel.get_pty()
        channel.exec_command("yes")
        channels.append(channel)
    tracemalloc.start()
    try:
        grown = 0
        for _ in range(30):  # 3 s: a buffering server takes in hundreds of MiB meanwhile
            time.sleep(0.1)
            grown = max(grown, tracemalloc.get_traced_memory()[0])
            if grown > 8 << 20:
                break
    finally:
        tracemalloc.stop()
        client.close()
    assert grown < 8 << 20, f"{grown >> 20} MiB of output nobody read held"


def test_an_absurd_terminal_size_leaves_the_session_alive(sim, key):
    pod = running(sim, key)
    client = _paramiko(pod, key)
    channel = client.get_transport().open_session()
    channel.get_pty(width=80, height=24)
    channel.exec_command("read line; stty size")
    channel.resize_pty(width=65536, height=65537)
    channel.resize_pty(width=100, height=30)
    channel.sendall(b"go\n")
    out = b""
    while chunk := channel.recv(1024):
        out += chunk
    assert out.replace(b"\r", b"").endswith(b"30 100\n")
    assert channel.recv_exit_status() == 0
    client.close()


def test_each_pod_has_a_public_ip_of_its_own_that_is_not_loopback(sim, key):
    """RunPod reports the public IP of the machine a pod runs on; the simulator serves
    on loopback but reports a routable-looking address of a machine of each pod's own,
    so a client that takes the address from RunPod cannot pass by connecting to
    127.0.0.1 (it goes through the ProxyCommand, as `ssh` above does)."""
    first, second = running(sim, key), running(sim, key)
    addresses = [pod["runtime"]["ports"][0]["ip"] for pod in (first, second)]
    assert addresses[0] != addresses[1]
    for address in addresses:
        assert not ipaddress.ip_address(address).is_loopback
        assert ipaddress.ip_address(address) in TEST_NET_3
    assert [pod["ssh"]["direct"]["host"] for pod in (first, second)] == addresses
