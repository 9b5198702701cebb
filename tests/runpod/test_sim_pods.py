"""Simulated pod lifecycle, driven through the real client: provisioning on the
simulated clock, actions allowed per status (409 otherwise), stop/start/restart,
delete and terminate, process exit with and without our stop-on-exit wrapper, the
container log as SSE and the exit code read from it, listing lag, vanishing, a runtime stuck at
null, ERROR, foreign pods and capacity given back."""

from __future__ import annotations

import json

import pytest
import requests

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.logstream import exit_log
from reconciler.core.contract import OWNER_ENV, STOP_ON_EXIT_ENV, exit_code_marker
from reconciler.core.domain import InstanceStatus
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, OWNER, RTX_4090, ActionRefused, create_request, pod_action

BATCH_ENV = {OWNER_ENV: OWNER, STOP_ON_EXIT_ENV: "1"}


def _running(sim: RunPodSimulator, client: RunPodClient, **overrides: object) -> str:
    instance_id = client.instances.create(create_request(**overrides)).id
    sim.advance(15)
    return instance_id


def test_provisioning_progresses_with_the_clock(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance = client.instances.create(create_request())
    assert instance.status is InstanceStatus.PROVISIONING and instance.runtime is None
    sim.advance(5)
    assert client.instances.get(instance.id).status is InstanceStatus.STARTING
    sim.advance(9.9)
    assert client.instances.get(instance.id).runtime is None
    sim.advance(0.1)
    running = client.instances.get(instance.id)
    assert running.status is InstanceStatus.RUNNING and running.runtime is not None


def test_a_bigger_image_pulls_longer(sim: RunPodSimulator, client: RunPodClient) -> None:
    sim.account.set_image_pull_seconds("huge:1", 120)
    instance_id = client.instances.create(create_request(image="huge:1")).id
    sim.advance(60)
    assert client.instances.get(instance_id).status is InstanceStatus.STARTING
    sim.advance(75)
    assert client.instances.get(instance_id).status is InstanceStatus.RUNNING


def test_actions_follow_the_status(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance = client.instances.create(create_request())
    assert instance.actions == ("stop", "terminate")
    for action in ("restart", "start"):
        with pytest.raises(ActionRefused) as refused:
            pod_action(sim, instance.id, action)
        assert refused.value.status == 409


def test_stop_then_start(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, client)
    stopped = pod_action(sim, instance_id, "stop")
    assert stopped is not None and stopped.status is InstanceStatus.EXITED
    assert stopped.cost_per_hr == 0 and stopped.runtime is None
    assert stopped.actions == ("start", "terminate")
    started = pod_action(sim, instance_id, "start")
    assert started is not None and started.status is InstanceStatus.STARTING
    sim.advance(10)
    assert client.instances.get(instance_id).status is InstanceStatus.RUNNING


def test_restart_resets_uptime(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, client)
    sim.advance(100)
    restarted = pod_action(sim, instance_id, "restart")
    assert restarted is not None and restarted.runtime is not None
    assert restarted.runtime.uptime_seconds == 0


def test_terminate_and_delete_remove_the_pod(sim: RunPodSimulator, client: RunPodClient) -> None:
    first, second = _running(sim, client), _running(sim, client)
    assert pod_action(sim, first, "terminate") is None
    client.instances.delete(second)
    assert client.instances.list() == []
    # The contract's TERMINATED: "permanently deleted", still readable by id, free.
    for gone in (first, second):
        read = client.instances.get(gone)
        assert (read.status, read.cost_per_hr, read.runtime, read.actions) == (
            InstanceStatus.TERMINATED,
            0.0,
            None,
            (),
        )
    with pytest.raises(ActionRefused) as refused:
        pod_action(sim, first, "stop")  # nothing left to act on
    assert refused.value.status == 404


def test_wrapped_process_exit_stops_the_pod_and_leaves_its_code(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    instance_id = _running(sim, client, env=BATCH_ENV)
    sim.exit_process(instance_id, 3)
    assert client.instances.get(instance_id).status is InstanceStatus.EXITED
    assert exit_log(client.instances.read_ended_log(instance_id), "1").code == 3


def test_the_last_exit_code_wins(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, client, env=BATCH_ENV)
    sim.exit_process(instance_id, 1)
    pod_action(sim, instance_id, "start")
    sim.advance(10)
    sim.exit_process(instance_id, 0)
    assert exit_log(client.instances.read_ended_log(instance_id), "1").code == 0


def test_unwrapped_process_exit_is_restarted(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, client)
    sim.advance(30)
    sim.exit_process(instance_id, 1)
    instance = client.instances.get(instance_id)
    assert instance.status is InstanceStatus.RUNNING
    assert instance.runtime is not None and instance.runtime.uptime_seconds == 0
    assert exit_log(client.instances.read_ended_log(instance_id), "1").code is None


def test_exit_needs_a_running_process(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = client.instances.create(create_request()).id
    with pytest.raises(ValueError, match="PROVISIONING"):
        sim.exit_process(instance_id, 0)


def test_logs_are_server_sent_events(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, client, env=BATCH_ENV)
    sim.exit_process(instance_id, 7)
    url = f"{sim.base_url}/v2/pods/{instance_id}/logs"
    headers = {"Authorization": f"Bearer {API_KEY}"}
    answer = requests.get(url, params={"tail": "2"}, headers=headers, timeout=5)
    assert answer.headers["Content-Type"].startswith("text/event-stream")
    events = [block.split("\n") for block in answer.text.strip().split("\n\n")]
    assert [event[0].startswith("id: 2026-01-01T00:00:15Z/") for event in events] == [True, True]
    lines = [json.loads(event[1].removeprefix("data: ")) for event in events]
    assert lines[0] == {
        "ts": "2026-01-01T00:00:15Z",
        "source": "container",
        "line": f"{exit_code_marker('1')}7",
    }
    assert lines[1]["source"] == "system"
    container = requests.get(url, params={"source": "container"}, headers=headers, timeout=5)
    assert "pulling image" not in container.text and "container started" in container.text


def test_listing_lags_behind_creation(sim: RunPodSimulator, client: RunPodClient) -> None:
    sim.account.set_listing_lag(20)
    instance_id = client.instances.create(create_request()).id
    assert client.instances.list() == []
    assert client.instances.get(instance_id).id == instance_id
    sim.advance(20)
    assert [instance.id for instance in client.instances.list()] == [instance_id]


def test_a_vanished_instance_is_gone(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, client)
    sim.vanish(instance_id)
    assert client.instances.list() == []
    with pytest.raises(errors.RunPodNotFound):
        client.instances.get(instance_id)


def test_runtime_can_stay_null_while_running(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = client.instances.create(create_request()).id
    sim.stick_runtime_null(instance_id)
    sim.advance(600)
    instance = client.instances.get(instance_id)
    assert instance.status is InstanceStatus.RUNNING and instance.runtime is None


def test_a_failed_instance_is_error(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, client)
    sim.fail_instance(instance_id)
    instance = client.instances.get(instance_id)
    assert instance.status is InstanceStatus.ERROR
    assert instance.actions == ("start", "terminate")


def test_foreign_instances_carry_no_owner(sim: RunPodSimulator, client: RunPodClient) -> None:
    sim.add_foreign_instance(env={OWNER_ENV: "spoofed", "HOME": "/root"})
    (foreign,) = client.instances.list()
    assert foreign.owner is None and foreign.env == {"HOME": "/root"}
    assert foreign.status is InstanceStatus.RUNNING


def test_deleting_gives_capacity_back(sim: RunPodSimulator, client: RunPodClient) -> None:
    for datacenter in ("US-TX-3", "EU-RO-1", "US-KS-2"):
        sim.account.set_capacity(RTX_4090, datacenter, 0)
    sim.account.set_capacity(RTX_4090, "EU-RO-1", 1)
    first = client.instances.create(create_request())
    with pytest.raises(errors.RejectedError, match="no capacity"):
        client.instances.create(create_request())
    client.instances.delete(first.id)
    assert client.instances.create(create_request()).datacenter_id == "EU-RO-1"


def test_stopping_frees_the_gpu_and_starting_needs_it_again(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    for datacenter in ("US-TX-3", "EU-RO-1", "US-KS-2"):
        sim.account.set_capacity(RTX_4090, datacenter, 0)
    sim.account.set_capacity(RTX_4090, "US-KS-2", 1)
    first = _running(sim, client)
    pod_action(sim, first, "stop")
    client.instances.create(create_request())
    with pytest.raises(ActionRefused, match="no capacity") as refused:
        pod_action(sim, first, "start")
    assert refused.value.status == 400


def test_an_id_is_never_given_twice(sim: RunPodSimulator, client: RunPodClient) -> None:
    """RunPod does not reuse ids: a deleted pod's id still answers TERMINATED and its
    bill stays, so a new pod given that id would overwrite both. The ids' random source
    repeating (as after a reset of its seed) must still give a new one."""
    import random

    first = client.instances.create(create_request()).id
    sim.advance(3600)
    client.instances.delete(first)
    billed = sim.billed(first)
    sim.account._random = random.Random(0)  # the same sequence again
    second = client.instances.create(create_request()).id
    assert second != first
    sim.advance(3600)
    assert sim.billed(first) == billed
    assert client.instances.get(first).status is InstanceStatus.TERMINATED
