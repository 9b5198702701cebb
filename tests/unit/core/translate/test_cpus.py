"""CPU instances for pods without a GPU: which pods get one (the --pods-without-gpu flag's
three values, GPU resources and annotations), the sizing (cheapest flavor, smallest
power-of-two vCPU count covering CPU and memory, the flavor's range), the
runpod.io/cpu-flavors override, the reasons when nothing fits (naming the largest
offer), the price cap, no persistent volume, and the request's list price."""

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
    KubeObject,
)
from reconciler.core.reasons import PodReason
from reconciler.core.translate.env import EnvSources
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.request import create_requests, requests_out_of_stock

from ...conftest import build_gpu, build_pod

OWNER = "cluster-1/virtual-runpod"
DEFAULTS = Settings()


def flavor(
    flavor_id: str,
    ram: float,
    price: float,
    vcpus: tuple[int, int] = (2, 32),
    availability: Availability = Availability.HIGH,
) -> CpuFlavor:
    return CpuFlavor(
        id=flavor_id,
        name=f"{flavor_id} name",
        vcpu_min=vcpus[0],
        vcpu_max=vcpus[1],
        ram_gb_per_vcpu=ram,
        price_per_vcpu=price,
        availability=availability,
        datacenters=(DataCenterStock("US-TX-3", availability),),
    )


CATALOG = (
    flavor("cpu3m", ram=8, price=0.06),
    flavor("cpu3c", ram=2, price=0.03),
    flavor("cpu5c", ram=2, price=0.05),
    flavor("cpu3g", ram=4, price=0.04, vcpus=(2, 64)),
)


def _create(
    pod: KubeObject,
    catalog: Sequence[CpuFlavor] = CATALOG,
    settings: Settings = DEFAULTS,
) -> list[CreateRequest]:
    gpus = (build_gpu("NVIDIA RTX A6000", price=0.49),)
    return create_requests(
        pod, None, EnvSources({}, {}), gpus, settings, OWNER, cpu_catalog=catalog
    )


def _sized(cpu: str | None = None, memory: str | None = None, **annotations: str) -> KubeObject:
    limits = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return build_pod(resources={"requests": limits}, annotations=annotations)


def _fails(pod: KubeObject, reason: PodReason, **kwargs: object) -> str:  # type: ignore[type-arg]
    with pytest.raises(TranslationError) as caught:
        _create(pod, **kwargs)  # type: ignore[arg-type]
    assert caught.value.reason == reason and caught.value.permanent
    return caught.value.message


def test_three_cpus_and_six_gib_get_four_vcpus_of_the_cheapest_flavor() -> None:
    requests = _create(_sized("3", "6Gi"))
    first = requests[0]
    assert (first.cpu_flavor_id, first.vcpu_count, first.gpu_type_id) == ("cpu3c", 4, "")
    assert first.gpu_count == 0 and first.offer_id == "cpu3c"
    assert first.hourly_price == pytest.approx(0.12)
    # Every flavor that fits is a candidate, cheapest first.
    assert [(r.cpu_flavor_id, r.vcpu_count) for r in requests] == [
        ("cpu3c", 4),
        ("cpu3g", 4),
        ("cpu5c", 4),
        ("cpu3m", 4),
    ]


def test_memory_can_decide_the_size() -> None:
    # 2 CPUs but 30 GB: 16 vCPUs of a 2 GB flavor (32 GB), 8 of a 4 GB one (32 GB),
    # 4 of an 8 GB one (32 GB): the last is cheapest at 0.24 USD/h.
    first = _create(_sized("2", "30G"))[0]
    assert (first.cpu_flavor_id, first.vcpu_count) == ("cpu3m", 4)


def test_a_limit_above_the_request_counts() -> None:
    pod = build_pod(resources={"requests": {"cpu": "1"}, "limits": {"cpu": "5"}})
    assert _create(pod)[0].vcpu_count == 8


def test_a_pod_without_resources_gets_the_smallest_size() -> None:
    first = _create(build_pod())[0]
    assert (first.cpu_flavor_id, first.vcpu_count) == ("cpu3c", 2)


def test_the_flavors_minimum_is_respected() -> None:
    first = _create(_sized("1"), catalog=(flavor("big", ram=2, price=0.01, vcpus=(8, 32)),))[0]
    assert first.vcpu_count == 8


def test_cpu_flavors_annotation_narrows_and_orders() -> None:
    pod = _sized("3", "6Gi", **{"runpod.io/cpu-flavors": "cpu3g,cpu5c name"})
    assert [r.cpu_flavor_id for r in _create(pod)] == ["cpu3g", "cpu5c"]


def test_cpu_flavors_annotation_naming_nothing_known_fails() -> None:
    message = _fails(
        _sized("2", **{"runpod.io/cpu-flavors": "cpu9x"}), PodReason.UNSATISFIABLE_CPU_REQUEST
    )
    assert "cpu9x" in message and "runpod.io/cpu-flavors" in message


def test_too_big_fails_naming_the_largest_offer() -> None:
    message = _fails(_sized("128", "2Ti"), PodReason.UNSATISFIABLE_CPU_REQUEST)
    assert message == (
        "no CPU flavor offers 128 vCPUs with 2199.0 GB of RAM; the largest offer is cpu3g "
        "with 64 vCPUs and 256 GB"
    )


def test_above_the_price_cap_fails() -> None:
    pod = _sized("32", **{"runpod.io/max-price": "0.5"})
    message = _fails(pod, PodReason.UNSATISFIABLE_CPU_REQUEST)
    assert "0.96 USD/h" in message and "0.50 USD/h" in message


def test_a_persistent_volume_is_refused() -> None:
    pod = _sized("2", **{"runpod.io/volume-gb": "20"})
    assert "persistent volume" in _fails(pod, PodReason.UNSATISFIABLE_CPU_REQUEST)


def test_community_cloud_is_refused() -> None:
    pod = _sized("2", **{"runpod.io/cloud-type": "COMMUNITY"})
    assert "SECURE" in _fails(pod, PodReason.UNSATISFIABLE_CPU_REQUEST)


def test_an_empty_cpu_catalog_waits() -> None:
    with pytest.raises(TranslationError) as caught:
        _create(_sized("2"), catalog=())
    assert caught.value.reason == PodReason.GPU_CATALOG_UNAVAILABLE
    assert not caught.value.permanent and "CPU catalog" in caught.value.message


@pytest.mark.parametrize(
    "pod",
    [
        build_pod(resources={"limits": {"nvidia.com/gpu": "1"}}),
        build_pod(resources={"requests": {"nvidia.com/gpu": "1", "cpu": "2"}}),
        build_pod(annotations={"runpod.io/gpu-types": "NVIDIA RTX A6000"}),
        build_pod(annotations={"runpod.io/required-gpu-memory": "24"}),
    ],
)
def test_a_pod_that_asks_for_a_gpu_gets_one(pod: KubeObject) -> None:
    for mode in PodsWithoutGpu:
        first = _create(pod, settings=Settings.of(pods_without_gpu=mode))[0]
        assert (first.gpu_type_id, first.cpu_flavor_id) == ("NVIDIA RTX A6000", None)


def test_flag_cpu_is_the_default() -> None:
    assert Settings().placement.pods_without_gpu is PodsWithoutGpu.CPU
    assert _create(_sized("2"), settings=Settings())[0].cpu_flavor_id == "cpu3c"


def test_flag_gpu_gives_one_gpu_as_before() -> None:
    first = _create(_sized("2"), settings=Settings.of(pods_without_gpu=PodsWithoutGpu.GPU))[0]
    assert (first.gpu_type_id, first.gpu_count, first.cpu_flavor_id) == (
        "NVIDIA RTX A6000",
        1,
        None,
    )
    assert first.hourly_price == pytest.approx(0.49)


def test_flag_refuse_fails_the_pod() -> None:
    settings = Settings.of(pods_without_gpu=PodsWithoutGpu.REFUSE)
    message = _fails(_sized("2"), PodReason.GPU_REQUIRED, settings=settings)
    assert "--pods-without-gpu=refuse" in message


def test_out_of_stock_counts_cpu_flavors() -> None:
    requests = _create(_sized("2"), catalog=(flavor("cpu3c", 2, 0.03),))
    empty = (flavor("cpu3c", 2, 0.03, availability=Availability.NONE),)
    assert not requests_out_of_stock(requests, (), (flavor("cpu3c", 2, 0.03),))
    assert requests_out_of_stock([replace(r, datacenter_ids=()) for r in requests], (), empty)
