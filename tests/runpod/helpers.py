"""Shared constants and builders for the RunPod client and simulator tests."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.domain import OWNER_ENV, POD_UID_ENV, CreateRequest

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
