"""`reconciler exec` as a real process against both simulators (CronJob mode, no kubelet
endpoint): the command's streams and exit code, stdin and its end with -i, the argv
quoted exactly, one-line errors for a pod that is not there or a key that is not the
instances', a host key that changed since an earlier run saw it, and -t's pty."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.sim.runpod.net import PROXY_COMMAND

# The simulator's public IPs are reached through its network's relay, as a cluster that
# cannot route to RunPod would reach them through a bastion.
ENV = {
    **os.environ,
    "RUNPOD_API_KEY": API_KEY,
    "RECONCILER_SSH_PROXY_COMMAND": PROXY_COMMAND,
}


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        sandbox.enable_ssh(str(tmp_path / "key"))
        sandbox.add_pod("train", command=["python", "train.py"])
        sandbox.tick()
        sandbox.advance(30)
        sandbox.tick()
        yield sandbox


def run(box: Sandbox, *args: str, stdin: str = "", key: str = "") -> subprocess.CompletedProcess:
    argv = [
        sys.executable,
        "-m",
        "reconciler",
        "--database-url",
        box.database_url,
        "exec",
        "--kubeconfig",
        box.kubeconfig,
        "--runpod-url",
        box.runpod_sim.base_url,
        "--ssh-key-file",
        key or box.settings.ssh.key_file,
        *args,
    ]
    return subprocess.run(
        argv, input=stdin, env=ENV, capture_output=True, text=True, timeout=60, check=False
    )


def test_streams_and_exit_code(box: Sandbox) -> None:
    done = run(box, "default/train", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_stdin_and_an_exact_argv(box: Sandbox) -> None:
    done = run(
        box,
        "-i",
        "default/train",
        "--",
        "sh",
        "-c",
        'cat; printf "%s|" "$0"',
        "a b",
        stdin="data\n",
    )
    assert (done.returncode, done.stdout) == (0, "data\na b|"), done.stderr


def test_one_line_errors(box: Sandbox, tmp_path: Path) -> None:
    missing = run(box, "default/nope", "--", "true")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        'Error: pods "nope" not found on node "virtual-runpod"'
    ]
    other = run(box, "default/train", "--", "true", key=str(tmp_path / "another-key"))
    assert other.returncode == 1 and "refused the reconciler's key" in other.stderr


def test_a_changed_host_key_is_refused_on_a_later_run(box: Sandbox) -> None:
    # Each run is a new process: the first contact's key is in the database.
    assert run(box, "default/train", "--", "true").returncode == 0
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.ssh.set_running(instance["id"], True, new_host_key=True)
    done = run(box, "default/train", "--", "true")
    assert done.returncode == 1 and "host key" in done.stderr and "changed" in done.stderr


def test_tty_runs_the_command_on_a_pty_of_the_terminals_size(box: Sandbox) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    argv = [
        *(sys.executable, "-m", "reconciler", "--database-url", box.database_url, "exec"),
        *("--kubeconfig", box.kubeconfig, "--runpod-url", box.runpod_sim.base_url),
        *("--ssh-key-file", box.settings.ssh.key_file, "-i", "-t", "default/train", "--"),
        *("sh", "-c", "stty size; test -t 0 && echo on-a-tty; exit 4"),
    ]
    process = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=ENV, start_new_session=True
    )
    os.close(slave)
    output = b""
    with contextlib.suppress(OSError):  # EIO once the process has exited
        while chunk := os.read(master, 4096):
            output += chunk
    os.close(master)
    assert process.wait(60) == 4, output
    assert b"33 101\r\non-a-tty\r\n" in output


def test_tty_follows_the_terminals_resize_while_the_command_runs(box: Sandbox) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    command = (
        "echo ready; read line; for i in $(seq 50); do s=$(stty size); "
        '[ "$s" = "40 120" ] && break; sleep 0.1; done; echo "size $s"'
    )
    argv = [
        *(sys.executable, "-m", "reconciler", "--database-url", box.database_url, "exec"),
        *("--kubeconfig", box.kubeconfig, "--runpod-url", box.runpod_sim.base_url),
        *("--ssh-key-file", box.settings.ssh.key_file, "-i", "-t", "default/train", "--"),
        *("sh", "-c", command),
    ]
    process = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=ENV, start_new_session=True
    )
    os.close(slave)
    output = b""
    while b"ready" not in output:
        output += os.read(master, 4096)
    # The terminal grows to 40 rows of 120 columns; its owner is told by SIGWINCH.
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process.send_signal(signal.SIGWINCH)
    os.write(master, b"go\r")
    with contextlib.suppress(OSError):  # EIO once the process has exited
        while chunk := os.read(master, 4096):
            output += chunk
    os.close(master)
    assert process.wait(60) == 0, output
    assert b"size 40 120" in output, output


def test_the_pod_is_named_as_logs_names_it_too(box: Sandbox) -> None:
    """`-n NAMESPACE POD` as kubectl, or `NAMESPACE/POD`; a clash between them is refused."""
    assert run(box, "-n", "default", "train", "--", "echo", "hi").stdout == "hi\n"
    assert run(box, "train", "--", "echo", "hi").stdout == "hi\n"
    clash = run(box, "-n", "ml", "default/train", "--", "true")
    assert clash.returncode == 2 and "names namespace default, but -n says ml" in clash.stderr


def test_an_instance_nothing_reaches_is_not_blamed_on_the_image_alone(box: Sandbox) -> None:
    """A connection that fails before SSH is spoken (here the way there ends at once, as a
    ProxyCommand that cannot reach the network does) names both causes: no sshd in the
    image, or no way from here to the instance's address."""
    done = run(box, "--ssh-proxy-command", "false", "default/train", "--", "true")
    assert done.returncode == 1
    assert "no SSH server answers" in done.stderr and "--ssh-proxy-command" in done.stderr
