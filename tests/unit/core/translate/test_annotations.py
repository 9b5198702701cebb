"""Annotation readers: pod before Job, typed parsing, and errors that name the annotation
and the bad value (InvalidAnnotation, never permanent, never a silent default)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from reconciler.core.reasons import PodReason
from reconciler.core.translate import annotations as ann
from reconciler.core.translate.errors import TranslationError

from ...conftest import build_job, build_pod


def test_pod_annotation_wins_over_job() -> None:
    pod = build_pod(annotations={ann.MAX_PRICE: "1.5"})
    job = build_job({ann.MAX_PRICE: "3", ann.GPU_TYPES: "A40"})
    assert ann.read_price(pod, job, ann.MAX_PRICE) == 1.5
    assert ann.read_list(pod, job, ann.GPU_TYPES) == ("A40",)
    assert ann.read(pod, None, ann.GPU_TYPES) is None


@pytest.mark.parametrize(
    ("reader", "name", "value"),
    [
        (ann.read_int, ann.REQUIRED_GPU_MEMORY, "abc"),
        (ann.read_int, ann.REQUIRED_GPU_MEMORY, "0"),
        (ann.read_int, ann.CONTAINER_DISK_GB, "20.5"),
        (ann.read_price, ann.MAX_PRICE, "cheap"),
        (ann.read_price, ann.MAX_PRICE, "-1"),
        (ann.read_price, ann.MAX_PRICE, "nan"),
        (ann.read_list, ann.GPU_TYPES, "A40,,A100"),
        (ann.read_list, ann.DATACENTER_IDS, ""),
    ],
)
def test_malformed_value_names_annotation_and_value(
    reader: Callable[..., object], name: str, value: str
) -> None:
    with pytest.raises(TranslationError) as caught:
        reader(build_pod(annotations={name: value}), None, name)
    assert caught.value.reason == PodReason.INVALID_ANNOTATION
    assert not caught.value.permanent
    assert name in caught.value.message
    assert f'"{value}"' in caught.value.message


def test_required_gpu_memory_abc_is_invalid_annotation() -> None:
    pod = build_pod(annotations={ann.REQUIRED_GPU_MEMORY: "abc"})
    with pytest.raises(TranslationError) as caught:
        ann.read_int(pod, None, ann.REQUIRED_GPU_MEMORY)
    assert (
        caught.value.message
        == 'annotation runpod.io/required-gpu-memory: "abc" is not a whole number from 1 to '
        "1000000"
    )


def test_choice_is_case_insensitive_and_validated() -> None:
    pod = build_pod(annotations={ann.CLOUD_TYPE: "community"})
    assert ann.read_choice(pod, None, ann.CLOUD_TYPE, ("SECURE", "COMMUNITY")) == "COMMUNITY"
    with pytest.raises(TranslationError, match="one of SECURE, COMMUNITY"):
        ann.read_choice(
            build_pod(annotations={ann.CLOUD_TYPE: "spot"}),
            None,
            ann.CLOUD_TYPE,
            ("SECURE", "COMMUNITY"),
        )


@pytest.mark.parametrize(
    ("pod_annotations", "job_annotations", "job_labels", "managed"),
    [
        ({}, {}, {}, False),
        ({ann.MANAGED: "true"}, {}, {}, True),
        ({}, {ann.MANAGED: "TRUE"}, {}, True),
        ({}, {}, {ann.MANAGED: "true"}, True),
        ({ann.MANAGED: "false"}, {}, {ann.MANAGED: "true"}, False),
    ],
)
def test_managed_reads_pod_then_job_annotations_then_job_labels(
    pod_annotations: dict[str, str],
    job_annotations: dict[str, str],
    job_labels: dict[str, str],
    managed: bool,
) -> None:
    pod = build_pod(annotations=pod_annotations)
    assert ann.is_managed(pod, build_job(job_annotations, job_labels)) is managed


def test_flag_rejects_anything_but_true_or_false() -> None:
    with pytest.raises(TranslationError, match=re.escape('runpod.io/offload: "yes"')):
        ann.parse_flag(ann.OFFLOAD, "yes")
    assert ann.parse_flag(ann.OFFLOAD, " TRUE ") is True
    assert ann.parse_flag(ann.OFFLOAD, "false") is False
