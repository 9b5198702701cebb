"""`reconciler demo --keep-running`: every command it prints works as printed (the real
kubectl over TLS with the token, `kubectl logs` of a finished pod through the virtual
node's kubelet endpoint, the reconciler's own commands, the clock shortcut), the
example pod and Job it offers reach Running and go away when deleted, and it stops
cleanly on SIGINT."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from reconciler.demo.examples import EXAMPLES
from reconciler.demo.live import TICK_SECONDS, LiveWorld
from reconciler.demo.run import run_demo
from tests import needs


@pytest.fixture(autouse=True)
def _programs() -> None:
    needs.program("kubectl")
    needs.program("curl")


def run_printed(command: str) -> str:
    """Run one printed line as a shell would: `VAR=value` prefixes, then the program."""
    words, env = _as_process(command)
    done = subprocess.run(words, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def run_printed_while_stepping(command: str, world: LiveWorld) -> None:
    """For a command that waits for the world to move (kubectl delete waits until the
    pods are gone): the demo's loop runs meanwhile, as it does beside a person."""
    words, env = _as_process(command)
    process = subprocess.Popen(
        words, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    for _ in range(30):
        world.step()
        try:
            out, err = process.communicate(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            continue
    else:
        process.kill()
        pytest.fail(f"{command} did not finish")
    assert process.returncode == 0, f"{command}\n{out}\n{err}"


def _as_process(command: str) -> tuple[list[str], dict[str, str]]:
    words = shlex.split(command)
    env = dict(os.environ)
    while "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[0] == "reconciler":  # the console script of this checkout
        words = [sys.executable, "-m", "reconciler", *words[1:]]
    return words, env


def find(commands: list[str], *words: str) -> str:
    matches = [c for c in commands if all(w in c for w in words)]
    assert len(matches) == 1, (words, commands)
    return matches[0]


def run_shell(command: str) -> str:
    """A printed line that uses the shell's own syntax (a command substitution)."""
    env = {**os.environ}
    done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def pass_time(world: LiveWorld, seconds: float) -> None:
    """Simulated time passes in the demo's beats (a person would wait instead)."""
    for _ in range(int(seconds // 5)):
        world.box.advance(5)
        world.box.heartbeat.keep_alive()
        world.step()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_forward_answer(command: str, world: LiveWorld) -> str:
    """Run the printed port-forward on a free local port; what a GET through it answers."""
    local = free_port()
    words, env = _as_process(command.replace("8888:8888", f"{local}:8888"))
    process = subprocess.Popen(words, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        assert b"Forwarding from" in process.stdout.readline()
        return requests.get(f"http://127.0.0.1:{local}/", timeout=30).text
    finally:
        process.terminate()
        process.wait(10)


def test_printed_commands_work_and_the_examples_reach_running(tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    def use(world: LiveWorld) -> None:
        commands = world_commands["commands"]
        kubeconfig = world.box.kubeconfig
        assert "https://" in Path(kubeconfig).read_text()  # kubectl sends tokens over TLS only
        assert "virtual-runpod" in run_printed(find(commands, "get nodes"))
        apply = find(commands, "apply -f")
        assert {Path(p).name: Path(p).read_text() for p in shlex.split(apply)[5::2]} == EXAMPLES
        applied = run_printed(apply)
        assert "pod/gpu-notebook created" in applied and "job.batch/gpu-job created" in applied
        assert "job.batch/torchrun created" in applied
        pass_time(world, 40)  # scheduled, the Job's pod made, instances created and booted
        # The finished train pod's log, kept after its instance was terminated.
        assert run_printed(find(commands, "logs -n ml train")).endswith(
            "epoch 3/3 loss 0.31\nsaved the model to /workspace/model.pt\n"
        )
        listing = run_printed(find(commands, "get pods -A"))
        running = {
            line.split()[1] for line in listing.splitlines()[1:] if line.split()[3] == "Running"
        }
        assert "gpu-notebook" in running and "prep" in running, listing
        job_pods = [line for line in listing.splitlines() if " gpu-job-" in line]
        assert len(job_pods) == 1 and "Running" in job_pods[0], listing
        assert "runpod.io/pod-id" in run_printed(find(commands, "describe pod gpu-notebook"))
        assert run_printed(find(commands, "exec gpu-notebook")).startswith("hello from ")
        run_printed(find(commands, " cp "))
        notebook = world.box.instance_for(world.box.pod("gpu-notebook") or {})
        assert notebook is not None
        copied = world.box.runpod_sim.ssh_sandbox(notebook["id"]) / "workspace" / "gpu-pod.yaml"
        assert copied.read_text() == EXAMPLES["gpu-pod.yaml"]
        assert "answers on port 8888" in port_forward_answer(find(commands, "port-forward"), world)
        top = find(commands, "top pod")
        world.box.kube_sim.metrics.scrape()  # metrics-server's first scrape has no rate yet
        pass_time(world, 15)
        name, cpu = run_printed(top).splitlines()[1].split()[:2]
        # 40 % of a 4-vCPU instance's CPU (real time passes too between the scrapes).
        assert name == "prep" and abs(int(cpu.removesuffix("m")) - 1600) <= 20, cpu
        run_shell(find(commands, "/exit"))
        pass_time(world, 15)
        assert " 1/1 " in run_printed(find(commands, "get job gpu-job"))
        # The README's Indexed Job: two pods (the Job controller's, no more), one cluster.
        ranks = run_printed(find(commands, "job-name=torchrun")).splitlines()[1:]
        assert sorted(line.split()[1:2] + line.split()[3:] for line in ranks) == [
            ["Running", "0"],
            ["Running", "1"],
        ], ranks
        assert len(world.box.runpod_sim.clusters) == 1
        refused = [e for e in world.box.kube_sim.list("events") if "Invalid" in e["reason"]]
        assert refused == []
        assert "gpu-notebook" in run_printed(find(commands, "state show"))
        # A dry run beside the running demo, which holds the writer lock.
        assert "dry run ok" in run_printed(find(commands, "sync --once --dry-run"))
        run_printed_while_stepping(find(commands, "delete -f"), world)
        left = json.loads(
            run_printed(f"kubectl --kubeconfig {kubeconfig} get pods -n default -o json")
        )["items"]
        seen["left"] = [p["metadata"]["name"] for p in left]
        seen["instances"] = [i["name"] for i in world.box.owned_instances()]

    world_commands: dict[str, list[str]] = {}
    lines: list[str] = []
    result = run_demo(
        lines.append,
        keep_running=True,
        wait=use,
        on_result=lambda r: world_commands.update(commands=r.commands),
    )
    assert seen["left"] == []
    assert not any("gpu" in str(name) for name in seen["instances"])  # type: ignore[attr-defined]
    assert result.duplicates == 0 and result.leaked == []


def test_keep_running_stops_cleanly_on_sigint() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "demo", "--keep-running"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("Stop with Ctrl-C"):
                break
        assert any("kubectl --kubeconfig" in line for line in lines), "".join(lines)
        time.sleep(3 * TICK_SECONDS)  # a few beats of the live world
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        # No false alarm: the jump of the clock to the present kept the node's Lease
        # renewed, and the simulators' servers are quiet.
        assert process.stderr is not None
        errors = process.stderr.read()
        assert "WARNING" not in "".join(lines) + errors, errors
    finally:
        if process.poll() is None:
            process.kill()
