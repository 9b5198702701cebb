"""Shared constants and builders for the RunPod client and simulator tests."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import requests

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.parse import parse_instance
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.core.domain import CreateRequest, Instance
from reconciler.sim.runpod.simulator import RunPodSimulator

# Distinctive, so a redaction test can search every output for it.
API_KEY = "rpa_TEST0KEY0MUST0NEVER0LEAK0b1e2c3"
RTX_4090 = "NVIDIA GeForce RTX 4090"
OWNER = "cluster-1/virtual-runpod"

ClientFactory = Callable[..., RunPodClient]


def create_request(**overrides: Any) -> CreateRequest:
    settings: dict[str, Any] = {
        "name": "default-train-0a1b2c3d",
        "image": "ghcr.io/example/train:1.0",
        "gpu_type_id": RTX_4090,
        "env": {OWNER_ENV: OWNER, POD_UID_ENV: "0a1b2c3d-uid"},
        "ports": ("22/tcp", "8888/http"),
    }
    settings.update(overrides)
    return CreateRequest(**settings)


def closed_port() -> int:
    """A loopback port nothing listens on, for connection-refused cases."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class ActionRefused(Exception):
    """The simulator refused a pod action; `status` is its HTTP status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail


def pod_action(sim: RunPodSimulator, instance_id: str, action: str) -> Instance | None:
    """`POST /v2/pods/{id}/action` as a RunPod user would send it.

    The reconciler never sends it (it terminates with DELETE, and a stopped instance
    still bills), so the client has no such call; the tests use it to put simulated
    instances into the states a user can bring them to. None for terminate (204).
    """
    answer = requests.post(
        f"{sim.base_url}/v2/pods/{instance_id}/action",
        json={"action": action},
        timeout=5,
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    if answer.status_code >= 400:
        raise ActionRefused(answer.status_code, str(answer.json().get("detail", "")))
    return None if answer.status_code == 204 else parse_instance(answer.json())
