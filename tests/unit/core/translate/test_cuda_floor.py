"""A pod's CUDA floor (`core/translate/cuda.py`): the annotation first, else the image's
tag by its rules, else none; and what it does to the create: `allowed_cuda_versions`
holds every version the catalog knows at or above it, only GPU types with such hosts are
candidates, a type with room only on older hosts ranks as out of stock, and a floor no
host meets makes the pod wait (CUDAVersionUnavailable) rather than fail."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from reconciler.core.config import PodsWithoutGpu, Settings
from reconciler.core.domain import (
    Availability,
    CpuFlavor,
    CreateRequest,
    DataCenterStock,
    GpuType,
    KubeObject,
)
from reconciler.core.reasons import PodReason
from reconciler.core.translate.cuda import image_floor, pod_floor
from reconciler.core.translate.env import EnvSources
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.request import create_requests

from ...conftest import build_gpu, build_job, build_pod

SETTINGS = Settings().with_values(pods_without_gpu=PodsWithoutGpu.GPU)
OLD = replace(
    build_gpu("NVIDIA RTX A6000", price=0.49),
    cuda_versions=("12.4", "12.2"),
    cuda_available=("12.4", "12.2"),
)
NEW = replace(
    build_gpu("NVIDIA L40S", price=0.86),
    cuda_versions=("12.8", "12.6", "12.4"),
    cuda_available=("12.8", "12.6", "12.4"),
)
CATALOG = (OLD, NEW)


@pytest.mark.parametrize(
    ("image", "floor"),
    [
        ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", (12, 4)),
        ("pytorch/pytorch:2.5.1-CUDA12.4-cudnn9-runtime", (12, 4)),
        ("vllm/vllm-openai:v0.6.0-cuda-12.1", (12, 1)),
        ("ghcr.io/x/y:cuda12.6.3-py3.11", (12, 6)),
        ("runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404", (12, 8)),
        ("ghcr.io/acme/train:torch2.4-cu124", (12, 4)),
        ("acme/train:cu118", (11, 8)),
        ("nvidia/cuda:12.4.1-devel-ubuntu22.04", (12, 4)),
        ("registry:5000/nvidia/cuda:11.8.0-runtime@sha256:" + "a" * 64, (11, 8)),
        ("ghcr.io/acme/train:1", None),
        ("acme/cuda-tools:latest", None),  # the name says cuda, the tag nothing
        ("acme/cu124-tools:1.0", None),
        ("acme/train:docu124", None),  # not a word of its own
        ("acme/train:cu12", None),  # a bare major names no version
        ("registry.cuda12.4.io:5000/train", None),  # the registry is not the tag
        ("acme/train@sha256:" + "b" * 64, None),
        ("ubuntu:22.04", None),  # a leading version only counts on an image named cuda
    ],
)
def test_the_image_tag_rules(image: str, floor: tuple[int, int] | None) -> None:
    assert image_floor(image) == floor


def test_the_annotation_overrides_the_tag_and_the_job_is_read_too() -> None:
    pod = build_pod(
        image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        annotations={"runpod.io/min-cuda-version": "12.8"},
    )
    assert pod_floor(pod, None).version == (12, 8)  # type: ignore[union-attr]
    plain = build_pod()
    job = build_job({"runpod.io/min-cuda-version": "12.10"})
    assert pod_floor(plain, job).version == (12, 10)  # type: ignore[union-attr]
    assert pod_floor(plain, None) is None


@pytest.mark.parametrize("value", ["12", "12.4.1", "v12.4", "twelve", "12,4", "", "١٢.٤"])
def test_a_malformed_annotation_is_an_invalid_annotation(value: str) -> None:
    pod = build_pod(annotations={"runpod.io/min-cuda-version": value})
    with pytest.raises(TranslationError) as raised:
        _create(pod)
    assert raised.value.reason is PodReason.INVALID_ANNOTATION
    assert "runpod.io/min-cuda-version" in raised.value.message
    assert not raised.value.permanent


def _create(pod: KubeObject, catalog: Sequence[GpuType] = CATALOG) -> list[CreateRequest]:
    sources = EnvSources(secrets={}, config_maps={})
    return create_requests(pod, None, sources, catalog, SETTINGS, "owner")


def test_the_readmes_image_is_created_only_on_hosts_at_its_floor() -> None:
    pod = build_pod(image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime")
    requests = _create(pod)
    assert [r.gpu_type_id for r in requests] == [OLD.id, NEW.id]
    assert {r.allowed_cuda_versions for r in requests} == {("12.8", "12.6", "12.4")}


def test_an_annotated_floor_leaves_out_types_without_such_hosts() -> None:
    pod = build_pod(annotations={"runpod.io/min-cuda-version": "12.8"})
    requests = _create(pod)
    assert [r.gpu_type_id for r in requests] == [NEW.id]
    assert requests[0].allowed_cuda_versions == ("12.8",)


def test_without_a_floor_any_host_will_do() -> None:
    requests = _create(build_pod())
    assert [r.allowed_cuda_versions for r in requests] == [(), ()]


def test_a_type_with_room_only_on_older_hosts_ranks_after_one_with_room_at_the_floor() -> None:
    full = replace(OLD, cuda_versions=("12.6", "12.2"), cuda_available=("12.2",))
    pod = build_pod(annotations={"runpod.io/min-cuda-version": "12.6"})
    requests = _create(pod, (full, NEW))
    assert [r.gpu_type_id for r in requests] == [NEW.id, OLD.id]  # the cheaper one is full


def test_a_floor_no_host_meets_waits_instead_of_failing() -> None:
    pod = build_pod(annotations={"runpod.io/min-cuda-version": "13.0"})
    with pytest.raises(TranslationError) as raised:
        _create(pod)
    assert raised.value.reason is PodReason.CUDA_VERSION_UNAVAILABLE
    assert not raised.value.permanent
    assert "13.0" in raised.value.message and "12.8" in raised.value.message


def test_a_cpu_pod_sends_no_cuda_constraint() -> None:
    pod = build_pod(
        image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        resources={"requests": {"cpu": "2"}},
    )
    flavor = CpuFlavor(
        "cpu3c",
        "Compute",
        2,
        32,
        2,
        0.03,
        Availability.HIGH,
        (DataCenterStock("US-TX-3", Availability.HIGH),),
    )
    settings = Settings().with_values(pods_without_gpu=PodsWithoutGpu.CPU)
    sources = EnvSources(secrets={}, config_maps={})
    requests = create_requests(pod, None, sources, CATALOG, settings, "owner", None, [flavor])
    assert requests and all(r.allowed_cuda_versions == () for r in requests)
