"""`reconciler demo --keep-running`, run as a person runs it (a subprocess in real time):
every command it prints works as printed with the real kubectl over TLS with the token
(the README's pod, its Job run to completion, the Indexed Job as one cluster, the claim
whose volume outlives its pod, logs of a finished pod through the virtual node's kubelet
endpoint, exec, cp, port-forward, top, the reconciler's own commands, the delete), nothing
printed is a false alarm, and it stops cleanly on SIGINT."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import requests

from reconciler.demo.examples import EXAMPLES
from reconciler.demo.live import TICK_SECONDS
from tests import needs

T = TypeVar("T")


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


def eventually(check: Callable[[], T], seconds: float = 90) -> T:
    """`check`'s answer once it stops raising AssertionError: the demo runs in real time."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_forward_answer(command: str) -> str:
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


def start_demo() -> tuple[subprocess.Popen[str], list[str]]:
    """`reconciler demo --keep-running` as a person runs it; the commands it prints."""
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "demo", "--keep-running"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("Stop with Ctrl-C"):
            break
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith("in another shell:"))
    commands = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        commands.append(line.strip())
    return process, commands


def stop_demo(process: subprocess.Popen[str]) -> str:
    """SIGINT, as Ctrl-C; what the demo wrote to stderr meanwhile."""
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    assert process.stderr is not None
    return process.stderr.read()


def test_every_readme_example_works_in_the_running_demo() -> None:
    """The pod, the Job to completion, logs, exec, cp, port-forward, top, the Indexed Job
    as one cluster, the reconciler's own commands and the delete, each as printed, with
    the real kubectl against the demo's process (in real time, as a person would)."""
    process, commands = start_demo()
    try:
        kubectl = find(commands, "get nodes").rsplit(" get nodes", 1)[0]
        assert "virtual-runpod" in run_printed(find(commands, "get nodes"))
        apply = find(commands, "apply -f", "gpu-pod.yaml")
        assert {Path(p).name: Path(p).read_text() for p in shlex.split(apply)[5::2]} == EXAMPLES
        applied = run_printed(apply)
        made = ("pod/gpu-notebook", "job.batch/gpu-job", "job.batch/torchrun", "pod/trainer")
        for name in (*made, "persistentvolumeclaim/checkpoints"):
            assert f"{name} created" in applied, applied
        # The finished train pod's log, kept after its instance was terminated.
        assert run_printed(find(commands, "logs -n ml train")).endswith(
            "epoch 3/3 loss 0.31\nsaved the model to /workspace/model.pt\n"
        )

        def running() -> str:
            listing = run_printed(find(commands, "get pods -A"))
            up = {
                line.split()[1] for line in listing.splitlines()[1:] if line.split()[3] == "Running"
            }
            assert {"gpu-notebook", "prep"} <= up, listing
            job_pods = [line for line in listing.splitlines() if " gpu-job-" in line]
            assert len(job_pods) == 1 and "Running" in job_pods[0], listing
            return listing

        eventually(running)
        assert "runpod.io/pod-id" in run_printed(find(commands, "describe pod gpu-notebook"))
        described = run_printed(find(commands, "describe pod gpu-notebook"))
        assert re.search(r"\n\s+Port:\s+8888/TCP\n", described), described
        assert run_printed(find(commands, "exec gpu-notebook")).startswith("hello from ")
        run_printed(find(commands, " cp "))
        copied = run_printed(f"{kubectl} exec gpu-notebook -- cat /workspace/gpu-pod.yaml")
        assert copied == EXAMPLES["gpu-pod.yaml"]
        assert "answers on port 8888" in port_forward_answer(find(commands, "port-forward"))

        def top() -> int:
            name, cpu = run_printed(find(commands, "top pod")).splitlines()[1].split()[:2]
            assert name == "prep"
            return int(cpu.removesuffix("m"))

        # 40 % of a 4-vCPU instance's CPU, from the first answer on: the demo printed the
        # command once metrics-server had scraped the pod (a rate needs two scrapes).
        assert abs(top() - 1600) <= 30
        # What the pods have cost so far, before any hour of billing is read.
        spent = json.loads(run_printed(find(commands, " cost") + " -o json"))
        assert spent["unbilled_list_usd_by_pod"]["ml/notebook"] > 0, spent
        assert run_printed(find(commands, " exec default/gpu-notebook ")).startswith("hello from ")

        # The README's claim: its volume is made where the pod's best offer is (nothing
        # pins a data center), the pod runs with it, and it outlives the pod.
        def trainer(uid: str = "") -> dict[str, Any]:
            pod = json.loads(run_printed(f"{kubectl} get pod trainer -o json"))
            assert pod["metadata"]["uid"] != uid and pod["status"]["phase"] == "Running", pod
            return pod

        first = eventually(trainer)
        claim = json.loads(run_printed(f"{kubectl} get pvc checkpoints -o json"))
        assert claim["status"]["phase"] == "Bound", claim
        volume = claim["spec"]["volumeName"]
        pv = json.loads(run_printed(f"{kubectl} get pv {volume} -o json"))
        where = first["metadata"]["annotations"]["runpod.io/datacenter"]
        assert pv["spec"]["csi"]["volumeAttributes"]["dataCenter"] == where
        events = run_printed(
            f"{kubectl} get events --field-selector involvedObject.name=checkpoints"
        )
        assert "ProvisioningFailed" not in events, events
        run_printed(find(commands, "echo step 100"))
        run_printed(find(commands, "delete pod trainer"))
        assert volume in run_printed(find(commands, "get pvc,pv"))
        run_printed(next(c for c in commands if "apply -f" in c and "gpu-pod.yaml" not in c))
        eventually(lambda: trainer(first["metadata"]["uid"]))
        assert run_printed(find(commands, "cat /checkpoints/latest")) == "step 100\n"

        # The README's Indexed Job: two pods (the Job controller's, no more), one cluster.
        def ranks() -> list[list[str]]:
            rows = run_printed(find(commands, "job-name=torchrun")).splitlines()[1:]
            found = sorted(row.split()[1:2] + row.split()[3:] for row in rows)
            assert found == [["Running", "0"], ["Running", "1"]], rows
            return found

        eventually(ranks)
        events = run_printed(f"{kubectl} get events -A")
        assert "InvalidClusterJob" not in events, events

        run_shell(find(commands, "/exit"))

        def complete() -> None:
            job = run_printed(find(commands, "get job gpu-job")).splitlines()[1].split()
            assert job[1:3] == ["Complete", "1/1"], job

        eventually(complete, 30)
        assert "gpu-notebook" in run_printed(find(commands, "state show"))
        ranked = run_printed(find(commands, " offers -f ")).splitlines()
        assert ranked[0].split()[:3] == ["TYPE", "COUNT", "DATACENTER"], ranked
        notebook = json.loads(run_printed(f"{kubectl} get pod gpu-notebook -o json"))
        made = notebook["metadata"]["annotations"]
        assert ranked[1].split()[-4] == made["runpod.io/datacenter"], ranked
        # A dry run beside the running demo, which holds the writer lock.
        assert "dry run ok" in run_printed(find(commands, "sync --once --dry-run"))
        run_printed(find(commands, "delete -f"))
        left = json.loads(run_printed(f"{kubectl} get pods -n default -o json"))["items"]
        # The Services' own pods stay (test_services_both_ways_work_as_printed).
        assert [p["metadata"]["name"] for p in left] == ["client", "web"]
    finally:
        errors = stop_demo(process) if process.poll() is None else ""
    # No false alarm in all of it.
    assert "WARNING" not in errors, errors


def test_services_both_ways_work_as_printed() -> None:
    """A pod made after the selector-less Service `backend` reaches the loopback server its
    EndpointSlice names by the kubelet's variables and by its full name; the Service `web`
    selecting a pod on RunPod gets the reconciler's EndpointSlice with a ready endpoint,
    and its printed address answers with the pod's port."""
    process, commands = start_demo()
    try:
        answer = "the in-cluster backend answers\n"
        by_variables = find(commands, "exec client", "BACKEND_SERVICE_HOST")
        eventually(lambda: _equal(run_printed(by_variables), answer))
        assert run_printed(find(commands, "exec client", "backend.default.svc")) == answer
        assert "backend.default.svc.cluster.local" in run_printed(find(commands, "/etc/hosts"))

        def ready() -> str:
            listed = run_printed(find(commands, "get endpointslices", "-o wide"))
            assert "192.0.2.10" in listed, listed
            return listed

        eventually(ready)

        def reach_web() -> str:
            answer = run_shell(find(commands, "curl -s http://127.0.0.1"))
            assert re.fullmatch(r"default-web-\w+ answers on port 8000\n", answer), answer
            return answer

        eventually(reach_web)
    finally:
        errors = stop_demo(process) if process.poll() is None else ""
    assert "WARNING" not in errors, errors


def _equal(found: str, wanted: str) -> str:
    assert found == wanted, (found, wanted)
    return found


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
