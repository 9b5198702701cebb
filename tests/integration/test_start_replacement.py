"""A start that does not finish is replaced, over real HTTP against both simulators: an
instance whose RunPod system lines show a start that cannot succeed on its host (the
CUDA requirement error, a GPU error), or that is not running `--start-timeout` after
its create (by RunPod's clock), is terminated (its end on the pod first, the row
terminating, the DELETE after) and the pod placed again elsewhere, each try an Event;
after `MAX_TRIES` places the pod fails saying what was tried. An image no host can pull
is not tried host after host: the pod waits with ErrImagePull, billing nothing. A
README-style image (`cuda12.4` in its tag) is created only on hosts at its floor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.core.capacity.starts import MAX_TRIES
from reconciler.core.config import Settings
from reconciler.core.contract import POD_UID_ENV
from reconciler.demo.sandbox import Sandbox

GPU = "NVIDIA GeForce RTX 4090"
IMAGE = "ghcr.io/acme/train:1"  # a tag that names no CUDA version


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(Settings.of(start_timeout=300), startup_lines="read") as sandbox:
        yield sandbox


def _creates(box: Sandbox) -> list[dict[str, Any]]:
    return [r.body for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods")]


def _deletes(box: Sandbox) -> list[str]:
    return [r.path.rsplit("/", 1)[1] for r in box.runpod_sim.requests if r.method == "DELETE"]


ONLY_4090 = {"runpod.io/gpu-types": GPU}


def _settle(box: Sandbox, ticks: int = 4, step: float = 15) -> None:
    for _ in range(ticks):
        box.tick()
        box.advance(step)


def _reasons(box: Sandbox) -> list[str]:
    return [e["reason"] for e in box.events("train")]


def test_a_host_too_old_for_the_image_is_left_for_another(box: Sandbox) -> None:
    box.runpod_sim.account.set_image_cuda(IMAGE, "12.6")
    box.runpod_sim.account.set_host_cuda(GPU, "US-TX-3", "12.2")  # the most free: first
    box.runpod_sim.account.set_host_cuda(GPU, "EU-RO-1", "12.8")
    box.add_pod("train", image=IMAGE, annotations=ONLY_4090)
    _settle(box, ticks=8)
    first = _creates(box)[0]
    failed = [i for i in box.runpod_sim.instances.values() if i["dataCenterId"] == "US-TX-3"]
    assert failed == []  # terminated: gone from the account
    assert len(_deletes(box)) == 1
    assert "InstanceStartFailed" in _reasons(box)
    # Gone only once RunPod says so: the old id read after the DELETE, before the create.
    old = _deletes(box)[0]
    calls = [(r.method, r.path) for r in box.runpod_sim.requests]
    delete = calls.index(("DELETE", f"/v2/pods/{old}"))
    second = [i for i, c in enumerate(calls) if c == ("POST", "/v2/pods")][1]
    assert ("GET", f"/v2/pods/{old}") in calls[delete:second]
    second = _creates(box)[1]
    assert "US-TX-3" not in second["dataCenterIds"]
    assert first["gpu"]["id"] == second["gpu"]["id"] == GPU
    pod = box.pod("train") or {}
    assert pod["status"]["phase"] == "Running"
    running = box.instance_for(pod) or {}
    assert running["dataCenterId"] == "EU-RO-1"
    assert pod["metadata"]["annotations"]["runpod.io/pod-id"] == running["id"]


def test_a_start_that_hangs_is_replaced_after_the_timeout(box: Sandbox) -> None:
    box.runpod_sim.account.set_host_fault(GPU, "US-TX-3", "stuck")
    box.add_pod("train", image=IMAGE, annotations=ONLY_4090)
    _settle(box, ticks=2)
    assert len(_creates(box)) == 1 and _deletes(box) == []
    box.advance(300)
    _settle(box, ticks=6)
    assert len(_deletes(box)) == 1
    assert (box.pod("train") or {})["status"]["phase"] == "Running"
    assert "US-TX-3" not in _creates(box)[1]["dataCenterIds"]


def test_the_end_is_on_the_pod_before_the_delete(box: Sandbox) -> None:
    box.runpod_sim.account.set_host_fault(GPU, "US-TX-3", "stuck")
    box.add_pod("train", image=IMAGE, annotations=ONLY_4090)
    _settle(box, ticks=2)
    box.advance(300)
    box.kube_sim.inject_fault("PATCH", "/api/v1/namespaces/default/pods/train/status", 409, 1)
    box.tick()
    assert _deletes(box) == []  # the patch was refused: the instance stays this tick
    box.tick()
    assert len(_deletes(box)) == 1


def test_after_its_tries_the_pod_fails_saying_where(box: Sandbox) -> None:
    for datacenter in ("US-TX-3", "EU-RO-1", "US-KS-2"):
        box.runpod_sim.account.set_host_fault(GPU, datacenter, "gpu")
    box.add_pod("train", image=IMAGE, annotations=ONLY_4090)
    _settle(box, ticks=12)
    pod = box.pod("train") or {}
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["reason"] == "InstanceStartFailed"
    for datacenter in ("US-TX-3", "EU-RO-1", "US-KS-2"):
        assert f"{GPU}@{datacenter}" in pod["status"]["message"]
    assert len(_creates(box)) == MAX_TRIES
    assert box.runpod_sim.instances == {}  # nothing left billing


def test_an_image_no_host_can_pull_waits_without_billing(box: Sandbox) -> None:
    box.runpod_sim.account.set_image_unpullable(IMAGE)
    box.add_pod("train", image=IMAGE, annotations=ONLY_4090)
    _settle(box)
    pod = box.pod("train") or {}
    assert pod["status"]["phase"] == "Pending"
    waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "ErrImagePull" and "pull access denied" in waiting["message"]
    assert box.runpod_sim.instances == {} and len(_creates(box)) == 1
    _settle(box, ticks=8, step=30)  # four minutes: within the back-off, no new create
    assert len(_creates(box)) == 1
    box.runpod_sim.account.unpullable.pop(IMAGE)  # the registry fixed
    _settle(box, ticks=8, step=30)  # past the back-off: tried again, and it runs
    assert len(_creates(box)) == 2
    assert (box.pod("train") or {})["status"]["phase"] == "Running"


def test_the_readmes_image_asks_only_for_hosts_at_its_floor(box: Sandbox) -> None:
    box.add_pod("train", image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime")
    box.add_pod("newer", image=IMAGE, annotations={"runpod.io/min-cuda-version": "12.8"})
    _settle(box, ticks=2)
    uids = {name: (box.pod(name) or {})["metadata"]["uid"] for name in ("train", "newer")}
    by_uid = {b["env"][POD_UID_ENV]: b for b in _creates(box)}
    bodies = {name: by_uid[uid] for name, uid in uids.items()}
    # every version RunPod's catalog lists at or above each floor (B200 hosts have 12.9)
    assert bodies["train"]["gpu"]["allowedCudaVersions"] == ["12.9", "12.8", "12.6", "12.4"]
    assert bodies["newer"]["gpu"]["allowedCudaVersions"] == ["12.9", "12.8"]


def test_an_instance_that_ran_is_never_replaced_for_losing_its_runtime(box: Sandbox) -> None:
    box.add_pod("train", image=IMAGE, annotations=ONLY_4090)
    _settle(box)
    running = box.instance_for(box.pod("train") or {}) or {}
    assert running.get("status") == "RUNNING"
    box.advance(3600)
    box.runpod_sim.stick_runtime_null(running["id"])  # RUNNING, no runtime: a glitch
    _settle(box)
    assert _deletes(box) == [] and len(_creates(box)) == 1
