"""GPU requirement and ranking: count from resources, annotations (memory, allow-list,
price cap, cloud, data centers intersected with the node's), candidates ranked by
price or allow-list position then availability with out-of-stock types last, data
centers per candidate, and the reasons an impossible request is explained with."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.config import Settings
from reconciler.core.domain import Availability, Cloud, GpuType
from reconciler.core.reasons import PodReason
from reconciler.core.translate import annotations as ann
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.gpus import (
    Candidate,
    GpuRequest,
    explain_unsatisfiable,
    gpu_request,
    rank,
    stock,
    unknown_datacenters,
)

from ...conftest import build_gpu, build_job, build_pod

H, M, L, N = Availability.HIGH, Availability.MEDIUM, Availability.LOW, Availability.NONE


BASE = GpuRequest(
    count=1,
    min_memory_gb=None,
    allowed_types=None,
    max_price=10.0,
    cloud=Cloud.SECURE,
    datacenter_ids=None,
)


def _request(**overrides: Any) -> GpuRequest:
    return replace(BASE, **overrides)


def _ids(candidates: list[tuple[GpuType, tuple[str, ...]]]) -> list[str]:
    return [gpu.id for gpu, _ in candidates]


# --- what the pod asks for ---------------------------------------------------------


@pytest.mark.parametrize(
    ("resources", "count"),
    [
        ({}, 1),
        ({"limits": {"nvidia.com/gpu": "2"}}, 2),
        ({"limits": {"nvidia.com/gpu": 4}, "requests": {"nvidia.com/gpu": "1"}}, 4),
        ({"requests": {"nvidia.com/gpu": "3"}}, 3),
    ],
)
def test_count_from_limits_then_requests_then_one(resources: dict[str, object], count: int) -> None:
    assert gpu_request(build_pod(resources=resources), None, Settings()).count == count


@pytest.mark.parametrize("value", ["0", "1.5", "two"])
def test_unusable_gpu_count_is_permanent(value: str) -> None:
    pod = build_pod(resources={"limits": {"nvidia.com/gpu": value}})
    with pytest.raises(TranslationError) as caught:
        gpu_request(pod, None, Settings())
    assert caught.value.reason == PodReason.UNSATISFIABLE_GPU_REQUEST and caught.value.permanent


def test_annotations_and_defaults() -> None:
    settings = Settings.of(max_gpu_price=1.5, cloud_type=Cloud.COMMUNITY)
    assert gpu_request(build_pod(), None, settings) == _request(
        max_price=1.5, cloud=Cloud.COMMUNITY
    )
    pod = build_pod(
        annotations={
            ann.REQUIRED_GPU_MEMORY: "48",
            ann.GPU_TYPES: "A100 80GB PCIe, RTX 4090",
            ann.MAX_PRICE: "3.5",
            ann.CLOUD_TYPE: "secure",
        }
    )
    assert gpu_request(pod, build_job({ann.MAX_PRICE: "9"}), settings) == _request(
        min_memory_gb=48,
        allowed_types=("A100 80GB PCIe", "RTX 4090"),
        max_price=3.5,
        cloud=Cloud.SECURE,
    )


def test_memory_annotation_abc_is_invalid_not_permanent() -> None:
    pod = build_pod(annotations={ann.REQUIRED_GPU_MEMORY: "abc"})
    with pytest.raises(TranslationError) as caught:
        gpu_request(pod, None, Settings())
    assert caught.value.reason == PodReason.INVALID_ANNOTATION
    assert not caught.value.permanent
    assert ann.REQUIRED_GPU_MEMORY in caught.value.message and '"abc"' in caught.value.message


@pytest.mark.parametrize(
    ("annotation", "node", "expected"),
    [
        (None, (), None),
        (None, ("EU-RO-1", "US-TX-3"), ("EU-RO-1", "US-TX-3")),
        ("US-TX-3,CA-MTL-1", (), ("US-TX-3", "CA-MTL-1")),
        ("CA-MTL-1,US-TX-3,EU-RO-1", ("EU-RO-1", "US-TX-3"), ("US-TX-3", "EU-RO-1")),
    ],
)
def test_datacenters_are_intersected_with_the_node_allow_list(
    annotation: str | None, node: tuple[str, ...], expected: tuple[str, ...] | None
) -> None:
    pod = build_pod(annotations={} if annotation is None else {ann.DATACENTER_IDS: annotation})
    assert gpu_request(pod, None, Settings.of(datacenter_ids=node)).datacenter_ids == expected


def test_disjoint_datacenters_are_unsatisfiable_and_name_both_lists() -> None:
    pod = build_pod(annotations={ann.DATACENTER_IDS: "CA-MTL-1"})
    with pytest.raises(TranslationError) as caught:
        gpu_request(pod, None, Settings.of(datacenter_ids=("EU-RO-1", "US-TX-3")))
    assert caught.value.reason == PodReason.UNSATISFIABLE_GPU_REQUEST and caught.value.permanent
    assert "CA-MTL-1" in caught.value.message and "EU-RO-1, US-TX-3" in caught.value.message


# --- ranking -----------------------------------------------------------------------


def _in_stock(candidate: Candidate) -> bool:
    """Stock where the candidate may be placed (any data center when none is named)."""
    gpu, datacenters = candidate
    return stock(gpu, datacenters or None) is not Availability.NONE


def test_ranked_by_price_then_availability() -> None:
    catalog = [
        build_gpu("pricey", price=2.0),
        build_gpu("cheap-low", price=0.5, availability=L),
        build_gpu("cheap-high", price=0.5, availability=H),
        build_gpu("mid", price=1.0, availability=M),
    ]
    assert _ids(rank(_request(), catalog)) == ["cheap-high", "cheap-low", "mid", "pricey"]


def test_out_of_stock_types_rank_last_but_stay() -> None:
    catalog = [build_gpu("cheap-empty", price=0.1, availability=N), build_gpu("dear", price=3.0)]
    candidates = rank(_request(), catalog)
    assert _ids(candidates) == ["dear", "cheap-empty"]
    assert [_in_stock(c) for c in candidates] == [True, False]


def test_allow_list_order_wins_over_price_and_filters(catalog: list[GpuType]) -> None:
    request = _request(allowed_types=("NVIDIA A100 80GB PCIe", "rtx a5000"))
    assert _ids(rank(request, catalog)) == ["NVIDIA A100 80GB PCIe", "NVIDIA RTX A5000"]


def test_price_cap_is_for_the_whole_pod() -> None:
    catalog = [build_gpu("a", price=0.6), build_gpu("b", price=0.1)]
    assert _ids(rank(_request(count=3, max_price=1.0), catalog)) == ["b"]
    assert _ids(rank(_request(count=3, max_price=0.3), catalog)) == ["b"]  # 3 x 0.1, no float noise
    assert _ids(rank(_request(count=1, max_price=1.0), catalog)) == ["b", "a"]


def test_memory_and_count_filters(catalog: list[GpuType]) -> None:
    assert _ids(rank(_request(min_memory_gb=48, max_price=5), catalog)) == [
        "NVIDIA A100 80GB PCIe",
        "NVIDIA H100 80GB HBM3",
    ]
    small = [build_gpu("two-max", max_count=2), build_gpu("eight-max", max_count=8)]
    assert _ids(rank(_request(count=4), small)) == ["eight-max"]


def test_community_cloud_uses_its_prices_and_offers(catalog: list[GpuType]) -> None:
    secure = rank(_request(max_price=1.0), catalog)
    community = rank(_request(max_price=1.0, cloud=Cloud.COMMUNITY), catalog)
    assert _ids(secure) == ["NVIDIA RTX A5000", "NVIDIA GeForce RTX 4090"]
    # A100 costs 0.82 in community; the H100 is secure-only.
    assert _ids(community) == [
        "NVIDIA RTX A5000",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA A100 80GB PCIe",
    ]


def test_datacenters_with_stock_in_the_allowed_set_best_first() -> None:
    gpu = build_gpu("g", datacenters={"EU-RO-1": L, "US-TX-3": H, "CA-MTL-1": H, "US-GA-1": N})
    assert rank(_request(), [gpu])[0][1] == ("CA-MTL-1", "US-TX-3", "EU-RO-1")
    allowed = _request(datacenter_ids=("EU-RO-1", "US-TX-3", "US-GA-1"))
    assert rank(allowed, [gpu])[0][1] == ("US-TX-3", "EU-RO-1")


def test_no_stock_in_allowed_datacenters_keeps_the_allowed_set_and_ranks_last() -> None:
    empty_here = build_gpu("cheap", price=0.1, datacenters={"EU-RO-1": H, "US-GA-1": N})
    stocked = build_gpu("dear", price=2.0, datacenters={"US-GA-1": M})
    candidates = rank(_request(datacenter_ids=("US-GA-1",)), [empty_here, stocked])
    assert candidates == [(stocked, ("US-GA-1",)), (empty_here, ("US-GA-1",))]
    assert [_in_stock(c) for c in candidates] == [True, False]
    assert [_in_stock(c) for c in rank(_request(), [empty_here])] == [True]


# --- impossible requests -----------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "explanation"),
    [
        (
            _request(allowed_types=("TPU v5",)),
            "none of the GPU types in annotation runpod.io/gpu-types (TPU v5)",
        ),
        (_request(min_memory_gb=200), "has 200 GB of memory (the most is 80 GB)"),
        (_request(count=16), "offers 16 GPUs per pod in the SECURE cloud (the most is 8)"),
        (_request(max_price=0.1), "costs 0.27 USD/h for 1 GPU(s), above the limit of 0.10 USD/h"),
        (
            _request(allowed_types=("H100 80GB HBM3",), cloud=Cloud.COMMUNITY),
            "offered in the COMMUNITY cloud",
        ),
    ],
)
def test_impossible_requests_are_explained(
    catalog: list[GpuType], request_: GpuRequest, explanation: str
) -> None:
    assert rank(request_, catalog) == []
    assert explanation in explain_unsatisfiable(request_, catalog)


@given(
    st.lists(
        st.builds(
            build_gpu,
            st.text(alphabet="abcdef", min_size=1, max_size=4),
            memory=st.sampled_from([16, 24, 48, 80]),
            price=st.floats(0.1, 4.0),
            availability=st.sampled_from(list(Availability)),
            max_count=st.integers(1, 8),
            secure=st.booleans(),
        ),
        max_size=8,
    ),
    st.integers(1, 4),
    st.sampled_from([None, 24, 48]),
    st.floats(0.5, 8.0),
)
def test_ranking_properties(
    catalog: list[GpuType], count: int, memory: int | None, cap: float
) -> None:
    request = _request(count=count, min_memory_gb=memory, max_price=cap)
    candidates = rank(request, catalog)
    stocked = [gpu.availability is not N for gpu, _ in candidates]
    assert stocked == sorted(stocked, reverse=True)  # every in-stock type before any other
    for gpu, _ in candidates:
        assert gpu.secure and gpu.memory_gb >= (memory or 0) and count <= gpu.max_count_secure
        assert gpu.secure_price * count <= cap + 1e-6
    if not candidates:
        assert "fit the request" not in explain_unsatisfiable(request, catalog)


def test_unknown_datacenters_are_those_no_gpu_type_lists() -> None:
    listed = build_gpu("NVIDIA A40", datacenters={"US-TX-3": Availability.HIGH})
    assert unknown_datacenters(("US-TX-3", "US-XX-9"), [listed]) == ("US-XX-9",)
    # A catalog that names no data center cannot tell: nothing is called unknown.
    assert unknown_datacenters(("US-XX-9",), [replace(listed, datacenters=())]) == ()
