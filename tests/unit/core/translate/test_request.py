"""The entry point: one CreateRequest per ranked GPU type with the shared fields (name,
image, args, env with our owner / pod-uid tags, ports, storage, template, registry
credential), the storage annotations and their rules, and which errors surface first."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from reconciler.core.config import PodsWithoutGpu, Settings
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV, STOP_ON_EXIT_ENV, exit_nonce
from reconciler.core.domain import (
    Availability,
    Cloud,
    CreateRequest,
    GpuType,
    KubeObject,
    NetworkVolume,
    PersistentVolume,
    RunPodVolume,
)
from reconciler.core.reasons import PodReason
from reconciler.core.translate import annotations as ann
from reconciler.core.translate.container import wrap_for_batch
from reconciler.core.translate.env import EnvSources
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.request import create_requests, requests_out_of_stock

from ...conftest import build_gpu, build_job, build_pod

NO_SOURCES = EnvSources(secrets={}, config_maps={})
OWNER = "cluster-1/virtual-runpod"
DEFAULT_SETTINGS = Settings()


def _create(
    pod: KubeObject,
    job: KubeObject | None = None,
    *,
    catalog: Sequence[GpuType] = (build_gpu("g"),),
    settings: Settings = DEFAULT_SETTINGS,
    sources: EnvSources = NO_SOURCES,
    registry_auth_id: str | None = None,
    volumes: Sequence[RunPodVolume] | None = (RunPodVolume("vol_1", "data", 10, "EU-RO-1"),),
) -> list[CreateRequest]:
    # These pods ask for a GPU or are translated as before CPU instances (test_cpus.py).
    settings = settings.with_values(pods_without_gpu=PodsWithoutGpu.GPU)
    return create_requests(
        pod, job, sources, catalog, settings, OWNER, registry_auth_id, (), volumes
    )


def test_one_request_per_ranked_candidate(catalog: list[GpuType]) -> None:
    pod = build_pod(
        command=["python", "serve.py"],
        args=["--port", "$(PORT)"],
        env=[{"name": "PORT", "value": "8888"}],
        ports=[{"containerPort": 8888}, {"containerPort": 22}],
        resources={"limits": {"nvidia.com/gpu": "2"}},
    )
    requests = _create(pod, catalog=catalog, settings=Settings.of(max_gpu_price=4.0))
    assert [r.gpu_type_id for r in requests] == [
        "NVIDIA RTX A5000",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA A100 80GB PCIe",
    ]
    first = requests[0]
    assert first.name == "ml-train-0f1e2d3c"
    assert first.image == "ghcr.io/acme/train:1"
    assert first.args == "python serve.py --port 8888"
    assert first.gpu_count == 2 and first.cloud is Cloud.SECURE
    assert first.ports == ("8888/http", "22/tcp")
    assert first.env == {"PORT": "8888", OWNER_ENV: OWNER, POD_UID_ENV: pod["metadata"]["uid"]}
    assert first.container_disk_gb == 50
    assert all(r.env == first.env and r.args == first.args for r in requests)


def test_owner_tags_cannot_be_overridden_by_the_pod() -> None:
    pod = build_pod(env=[{"name": OWNER_ENV, "value": "someone-else"}])
    assert _create(pod)[0].env[OWNER_ENV] == OWNER


def test_batch_pod_is_wrapped_and_tagged() -> None:
    pod = build_pod(restart_policy="Never", command=["python", "train.py"])
    request = _create(pod)[0]
    nonce = exit_nonce(pod["metadata"]["uid"])
    assert request.args == wrap_for_batch("python train.py", nonce)
    assert request.env[STOP_ON_EXIT_ENV] == nonce


def test_datacenters_per_candidate() -> None:
    gpu = build_gpu("g", datacenters={"EU-RO-1": Availability.HIGH, "US-TX-3": Availability.LOW})
    pod = build_pod(annotations={ann.DATACENTER_IDS: "US-TX-3,CA-MTL-1"})
    assert _create(pod, catalog=[gpu])[0].datacenter_ids == ("US-TX-3",)


def test_template_registry_and_job_annotations() -> None:
    job = build_job({ann.TEMPLATE_ID_LEGACY: "tmpl-old", ann.CONTAINER_REGISTRY_AUTH_ID: "reg-job"})
    request = _create(build_pod(), job, registry_auth_id="reg-derived")[0]
    assert (request.template_id, request.registry_auth_id) == ("tmpl-old", "reg-job")
    pod = build_pod(annotations={ann.TEMPLATE_ID: "tmpl-new"})
    request = _create(pod, job, registry_auth_id="reg-derived")[0]
    assert request.template_id == "tmpl-new"
    assert _create(build_pod(), registry_auth_id="reg-derived")[0].registry_auth_id == "reg-derived"


def test_missing_image_is_allowed_only_with_a_template() -> None:
    containers = [{"name": "main"}]
    with pytest.raises(TranslationError) as caught:
        _create(build_pod(containers=containers))
    assert caught.value.reason == PodReason.INVALID_IMAGE_NAME and not caught.value.permanent
    templated = build_pod(containers=containers, annotations={ann.TEMPLATE_ID: "t"})
    assert _create(templated)[0].image == ""


# --- storage -------------------------------------------------------------------------


def test_storage_defaults_and_persistent_volume() -> None:
    assert (
        _create(build_pod(), settings=Settings.of(container_disk_gb=80))[0].container_disk_gb == 80
    )
    pod = build_pod(annotations={ann.CONTAINER_DISK_GB: "20", ann.VOLUME_GB: "100"})
    request = _create(pod)[0]
    assert request.container_disk_gb == 20
    assert request.persistent_volume == PersistentVolume(100, "/workspace")
    assert request.network_volume is None


def test_network_volume_with_mount_path() -> None:
    pod = build_pod(annotations={ann.NETWORK_VOLUME_ID: "vol_1", ann.VOLUME_MOUNT_PATH: "/data"})
    request = _create(pod)[0]
    assert request.network_volume == NetworkVolume("vol_1", "/data")
    assert request.persistent_volume is None


def test_a_network_volume_pins_every_candidate_to_its_data_center() -> None:
    catalog = [
        build_gpu("a", datacenters={"US-TX-3": Availability.HIGH, "EU-RO-1": Availability.LOW}),
        build_gpu("b", price=2.0, datacenters={"US-TX-3": Availability.HIGH}),
    ]
    pod = build_pod(annotations={ann.NETWORK_VOLUME_ID: "vol_1"})
    requests = _create(pod, catalog=catalog)
    # b is offered only elsewhere: a create of it there would be refused
    assert [(r.gpu_type_id, r.datacenter_ids) for r in requests] == [("a", ("EU-RO-1",))]


@pytest.mark.parametrize(
    ("annotations", "volumes", "says"),
    [
        ({ann.NETWORK_VOLUME_ID: "vol_9"}, None, "could not be listed"),
        ({ann.NETWORK_VOLUME_ID: "vol_9"}, (), 'no network volume "vol_9"'),
        (
            {ann.NETWORK_VOLUME_ID: "vol_1", ann.DATACENTER_IDS: "US-TX-3"},
            (RunPodVolume("vol_1", "data", 10, "EU-RO-1"),),
            "in data center EU-RO-1",
        ),
    ],
)
def test_a_network_volume_the_pod_cannot_use_is_a_reason(
    annotations: dict[str, str], volumes: Sequence[RunPodVolume] | None, says: str
) -> None:
    catalog = [build_gpu("a", datacenters={"US-TX-3": Availability.HIGH})]
    with pytest.raises(TranslationError) as caught:
        _create(build_pod(annotations=annotations), catalog=catalog, volumes=volumes)
    assert caught.value.reason is PodReason.NETWORK_VOLUME_UNAVAILABLE
    assert not caught.value.permanent
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        ({ann.VOLUME_GB: "5"}, ann.VOLUME_GB),
        ({ann.VOLUME_GB: "20", ann.NETWORK_VOLUME_ID: "vol_1"}, ann.NETWORK_VOLUME_ID),
        ({ann.VOLUME_MOUNT_PATH: "data"}, ann.VOLUME_MOUNT_PATH),
        ({ann.NETWORK_VOLUME_ID: " "}, ann.NETWORK_VOLUME_ID),
        ({ann.CONTAINER_DISK_GB: "0"}, ann.CONTAINER_DISK_GB),
    ],
)
def test_storage_annotation_errors(annotations: dict[str, str], named: str) -> None:
    with pytest.raises(TranslationError) as caught:
        _create(build_pod(annotations=annotations))
    assert caught.value.reason == PodReason.INVALID_ANNOTATION and not caught.value.permanent
    assert named in caught.value.message


# --- errors --------------------------------------------------------------------------


def test_impossible_gpu_request_is_permanent(catalog: list[GpuType]) -> None:
    pod = build_pod(annotations={ann.REQUIRED_GPU_MEMORY: "1000"})
    with pytest.raises(TranslationError) as caught:
        _create(pod, catalog=catalog)
    assert caught.value.reason == PodReason.UNSATISFIABLE_GPU_REQUEST and caught.value.permanent
    assert "1000 GB" in caught.value.message


def test_empty_catalog_is_not_proof_of_impossibility() -> None:
    with pytest.raises(TranslationError) as caught:
        _create(build_pod(), catalog=[])
    assert caught.value.reason == PodReason.GPU_CATALOG_UNAVAILABLE and not caught.value.permanent


def test_missing_secret_waits() -> None:
    pod = build_pod(env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "t"}}}])
    with pytest.raises(TranslationError) as caught:
        _create(pod)
    assert caught.value.reason is PodReason.CREATE_CONTAINER_CONFIG_ERROR
    assert not caught.value.permanent


def test_repr_of_requests_hides_secret_values() -> None:
    pod = build_pod(env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "t"}}}])
    sources = EnvSources(secrets={"tok": {"t": "very-secret"}}, config_maps={})
    request = _create(pod, sources=sources)[0]
    assert request.env["T"] == "very-secret"
    assert "very-secret" not in repr(request)


def test_requests_out_of_stock() -> None:
    empty = build_gpu("empty", availability=Availability.NONE)
    stocked = build_gpu("stocked", price=5.0)
    catalog = [empty, stocked]
    requests = _create(build_pod(), catalog=catalog, settings=Settings.of(max_gpu_price=10))
    assert not requests_out_of_stock(requests, catalog)
    assert requests_out_of_stock(requests[1:], catalog)
