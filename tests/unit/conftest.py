"""Builders for the pods, Jobs, GPU types and instances the unit tests translate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconciler.core.domain import Availability, DataCenterStock, GpuType, KubeObject

PodFactory = Callable[..., KubeObject]


def build_pod(
    *,
    annotations: dict[str, str] | None = None,
    containers: list[KubeObject] | None = None,
    restart_policy: str = "Always",
    name: str = "train",
    namespace: str = "ml",
    uid: str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    status: dict[str, Any] | None = None,
    **container: Any,
) -> KubeObject:
    """A pod bound to the virtual node; extra keywords go into its single container."""
    main = {"name": "main", "image": "ghcr.io/acme/train:1", **container}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "labels": {"app": "train"},
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "nodeName": "virtual-runpod",
            "serviceAccountName": "trainer",
            "restartPolicy": restart_policy,
            "containers": containers if containers is not None else [main],
        },
        "status": status if status is not None else {"phase": "Pending"},
    }


def build_job(
    annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None
) -> KubeObject:
    return {
        "metadata": {
            "name": "train-job",
            "namespace": "ml",
            "annotations": dict(annotations or {}),
            "labels": dict(labels or {}),
        }
    }


def build_gpu(
    gpu_id: str,
    *,
    memory: int = 24,
    price: float = 1.0,
    community_price: float | None = None,
    availability: Availability = Availability.HIGH,
    datacenters: dict[str, Availability] | None = None,
    secure: bool = True,
    community: bool = True,
    max_count: int = 8,
) -> GpuType:
    return GpuType(
        id=gpu_id,
        name=gpu_id.removeprefix("NVIDIA ").removeprefix("GeForce "),
        memory_gb=memory,
        secure=secure,
        community=community,
        secure_price=price,
        community_price=price / 2 if community_price is None else community_price,
        max_count_secure=max_count,
        max_count_community=max_count,
        availability=availability,
        datacenters=tuple(DataCenterStock(dc, level) for dc, level in (datacenters or {}).items()),
    )


@pytest.fixture
def catalog() -> list[GpuType]:
    return [
        build_gpu("NVIDIA A100 80GB PCIe", memory=80, price=1.64, availability=Availability.LOW),
        build_gpu("NVIDIA GeForce RTX 4090", memory=24, price=0.69),
        build_gpu("NVIDIA RTX A5000", memory=24, price=0.27, availability=Availability.MEDIUM),
        build_gpu("NVIDIA H100 80GB HBM3", memory=80, price=2.99, community=False),
    ]
