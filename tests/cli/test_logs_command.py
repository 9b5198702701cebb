"""`reconciler logs` as a real process against both simulators: a plain read with
--tail and --timestamps, `-f` receiving a line printed after it started and ending when
the batch pod's instance stops, a finished pod's kept log, a clear one-line error for a
pod that is not there, and durations as kubectl takes them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta

import click
import pytest

from reconciler.cli.logs_command import parse_duration
from reconciler.demo.sandbox import API_KEY, Sandbox


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        yield sandbox


def start_pod(box: Sandbox, name: str, restart_policy: str = "Always") -> str:
    box.add_pod(name, command=["python", "train.py"], restart_policy=restart_policy)
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod(name) or {})
    assert instance is not None
    return str(instance["id"])


def command(box: Sandbox, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "reconciler",
        "--database-url",
        box.database_url,
        "logs",
        "--kubeconfig",
        box.kubeconfig,
        "--runpod-url",
        box.runpod_sim.base_url,
        *args,
    ]


ENV = {**os.environ, "RUNPOD_API_KEY": API_KEY}


def test_plain_read_with_tail_and_timestamps(box: Sandbox) -> None:
    instance_id = start_pod(box, "train")
    box.runpod_sim.logs.write_container(instance_id, ["a", "b", "c"])
    done = subprocess.run(
        command(box, "train", "--tail", "2"), env=ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "b\nc\n"
    stamped = subprocess.run(
        command(box, "train", "--tail", "1", "--timestamps"),
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert stamped.startswith("2026-01-01T00:00:30") and stamped.endswith(" c\n")


def test_follow_gets_new_lines_and_ends_with_the_instance(box: Sandbox) -> None:
    instance_id = start_pod(box, "job", restart_policy="Never")
    box.runpod_sim.logs.write_container(instance_id, ["first"])
    follower = subprocess.Popen(
        command(box, "-f", "job"),
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        # (the simulated container says "container started" when it starts)
        assert [follower.stdout.readline() for _ in range(2)] == ["container started\n", "first\n"]
        box.runpod_sim.logs.write_container(instance_id, ["second"])
        assert follower.stdout.readline() == "second\n"
        box.runpod_sim.exit_process(instance_id, 0)
        assert follower.wait(timeout=30) == 0
        assert follower.stdout.read() == ""  # the wrapper's marker line is not shown
    finally:
        follower.kill()
        follower.wait()


def test_a_finished_pods_kept_log_and_a_missing_pod(box: Sandbox) -> None:
    instance_id = start_pod(box, "job", restart_policy="Never")
    box.runpod_sim.logs.write_container(instance_id, ["result: 42"])
    box.runpod_sim.exit_process(instance_id, 0)
    for _ in range(2):
        box.tick()
        box.advance(30)
    assert instance_id not in box.runpod_sim.instances
    done = subprocess.run(command(box, "job"), env=ENV, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("result: 42\n")
    missing = subprocess.run(
        command(box, "nope"), env=ENV, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error: pods "nope" not found'


def test_durations() -> None:
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("45s") == timedelta(seconds=45)
    with pytest.raises(click.BadParameter):
        parse_duration("5 minutes")


def test_the_kubeconfig_context_is_picked_as_sync_picks_it(box: Sandbox) -> None:
    """`--context` (shared with `sync` and `drain`): the kubeconfig's own context reads
    the cluster; an unknown one is a one-line error that names it."""
    missing, unknown = (
        subprocess.run(
            command(box, "--context", context, "nope"),
            env=ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
        for context in ("sim", "other")
    )
    assert missing.stderr.strip() == 'Error: pods "nope" not found'
    assert unknown.returncode == 1
    assert len(unknown.stderr.strip().splitlines()) == 1 and "other" in unknown.stderr


def test_the_pod_is_named_as_exec_names_it_too(box: Sandbox) -> None:
    instance_id = start_pod(box, "train")
    box.runpod_sim.logs.write_container(instance_id, ["a"])
    for args in (["default/train"], ["-n", "default", "train"], ["train"]):
        done = subprocess.run(command(box, *args), env=ENV, capture_output=True, text=True)
        assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "a"), (args, done.stderr)
