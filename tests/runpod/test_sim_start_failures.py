"""Starts that never finish on the simulated RunPod, as on the real one: an image no
host can pull (unknown, or refused by its registry), a host whose GPU the driver cannot
initialise, and a host whose start hangs without a word. Each pod stays STARTING with no
runtime and bills on; RunPod's system lines say what went wrong (none for the hang); a
pod of the same image on a sound host runs."""

from __future__ import annotations

import pytest
import requests

from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, RTX_4090


def _lines(sim: RunPodSimulator, pod_id: str) -> list[str]:
    pod = sim.account.pods[pod_id]
    return [line.line for line in pod.visible_log(sim.clock.now(), "system")]


def _stuck(sim: RunPodSimulator, pod_id: str) -> None:
    served = sim.instances[pod_id]
    assert (served["status"], served["runtime"], served["startedAt"]) == ("STARTING", None, None)
    assert sim.billed(pod_id)["gpu"] > 0


def _create(sim: RunPodSimulator, datacenter: str, image: str = "acme/train:1") -> str:
    """A create over the API, as any client makes it."""
    body = {"name": "p", "image": image, "gpu": {"id": RTX_4090}, "dataCenterIds": [datacenter]}
    answer = requests.post(
        f"{sim.base_url}/v2/pods",
        json=body,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=5,
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


@pytest.mark.parametrize(
    ("unauthorized", "said"),
    [(False, "pull access denied for"), (True, "unauthorized: authentication required")],
)
def test_an_image_no_host_can_pull(sim: RunPodSimulator, unauthorized: bool, said: str) -> None:
    sim.account.set_image_unpullable("acme/missing:1", unauthorized)
    pod_ids = [_create(sim, dc, "acme/missing:1") for dc in ("US-TX-3", "EU-RO-1")]
    sim.advance(600)
    for pod_id in pod_ids:
        _stuck(sim, pod_id)
        assert any(said in line for line in _lines(sim, pod_id))


def test_a_host_whose_gpu_fails(sim: RunPodSimulator) -> None:
    sim.account.set_host_fault(RTX_4090, "US-TX-3", "gpu")
    broken, sound = _create(sim, "US-TX-3"), _create(sim, "EU-RO-1")
    sim.advance(600)
    _stuck(sim, broken)
    assert any("nvml error" in line for line in _lines(sim, broken))
    assert sim.instances[sound]["status"] == "RUNNING"


def test_a_host_whose_start_hangs_says_nothing(sim: RunPodSimulator) -> None:
    sim.account.set_host_fault(RTX_4090, "US-TX-3", "stuck")
    pod_id = _create(sim, "US-TX-3")
    sim.advance(3600)
    _stuck(sim, pod_id)
    assert _lines(sim, pod_id) == ["pulling image acme/train:1"]
    sim.account.set_host_fault(RTX_4090, "US-TX-3", None)
    mended = _create(sim, "US-TX-3")
    sim.advance(60)
    assert sim.instances[mended]["status"] == "RUNNING"
