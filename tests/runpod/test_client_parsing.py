"""Client parsing and request bodies: the exact v2 create body built from a
CreateRequest, and tolerant reading of pods (unknown status, cost as a string,
unknown fields, an empty runtime object, odd timestamps, missing env), all through
real HTTP against pods whose served JSON the simulator alters."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.parse import parse_runtime
from reconciler.core.domain import (
    Cloud,
    InstanceStatus,
    NetworkVolume,
    PersistentVolume,
    PortMapping,
)
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import OWNER, RTX_4090, create_request


def _running(sim: RunPodSimulator, **fields: object) -> str:
    instance_id = sim.add_instance("drifted", ports=["22/tcp", "8888/http"])
    sim.set_instance_fields(instance_id, fields)
    return instance_id


def test_full_create_body(sim: RunPodSimulator, client: RunPodClient) -> None:
    registry = client.registries.create("hub", "me", "s3cret")
    sim.account.add_template("tpl-1", image="base:1", env={"FROM_TEMPLATE": "1"})
    request = create_request(
        gpu_count=2,
        cloud=Cloud.COMMUNITY,
        datacenter_ids=("EU-RO-1",),
        args="python train.py --epochs 3",
        container_disk_gb=40,
        persistent_volume=PersistentVolume(size_gb=20, path="/workspace"),
        template_id="tpl-1",
        registry_auth_id=registry.id,
    )
    instance = client.instances.create(request)
    assert sim.requests[-1].body == {
        "name": "default-train-0a1b2c3d",
        "image": "ghcr.io/example/train:1.0",
        "gpu": {"id": RTX_4090, "count": 2},
        "cloud": "COMMUNITY",
        "dataCenterIds": ["EU-RO-1"],
        "args": "python train.py --epochs 3",
        "env": dict(request.env),
        "ports": ["22/tcp", "8888/http"],
        "disk": 40,
        "mounts": {"persistent": {"size": 20, "path": "/workspace"}},
        "templateId": "tpl-1",
        "registry": registry.id,
    }
    assert instance.datacenter_id == "EU-RO-1"
    assert instance.env == {**request.env, "FROM_TEMPLATE": "1"}


def test_minimal_create_body_leaves_optional_fields_out(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    client.instances.create(create_request(env={}, ports=()))
    assert sim.requests[-1].body == {
        "name": "default-train-0a1b2c3d",
        "image": "ghcr.io/example/train:1.0",
        "gpu": {"id": RTX_4090, "count": 1},
        "cloud": "SECURE",
        "env": {},
    }


def test_network_volume_body(sim: RunPodSimulator, client: RunPodClient) -> None:
    volume = sim.add_volume("data", 10, "US-KS-2")
    instance = client.instances.create(
        create_request(network_volume=NetworkVolume(volume.id, "/data"))
    )
    assert sim.requests[-1].body["mounts"] == {
        "network": [{"volumeId": volume.id, "path": "/data"}]
    }
    assert instance.datacenter_id == "US-KS-2"


def test_a_running_instance_is_read_completely(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance = client.instances.create(create_request())
    sim.advance(60)
    read = client.instances.get(instance.id)
    assert read.status is InstanceStatus.RUNNING
    assert read.owner == OWNER
    assert read.gpu_type_id == RTX_4090 and read.gpu_count == 1
    assert read.cloud == "SECURE" and read.datacenter_id
    assert read.cost_per_hr == pytest.approx(0.69)
    assert read.actions == ("stop", "restart", "terminate")
    assert read.created_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert read.started_at == datetime(2026, 1, 1, 0, 0, 15, tzinfo=UTC)
    assert read.runtime is not None and read.runtime.uptime_seconds == 45
    ssh, http = read.runtime.ports
    assert ssh.protocol == "tcp" and ssh.private_port == 22
    assert ssh.public_ip and ssh.public_port
    assert http == PortMapping(private_port=8888, protocol="http")


def test_unknown_status_is_unknown(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, status="HIBERNATING")
    assert client.instances.get(instance_id).status is InstanceStatus.UNKNOWN


def test_cost_as_a_numeric_string(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, cost="0.4400")
    assert client.instances.get(instance_id).cost_per_hr == pytest.approx(0.44)


def test_unknown_fields_are_ignored(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, spotBid={"price": 0.2}, machine={"id": "m-1"}, interruptible=True)
    assert client.instances.list()[0].id == instance_id


def test_empty_runtime_object_means_no_runtime_yet(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    instance_id = _running(sim, runtime={})
    instance = client.instances.get(instance_id)
    assert instance.status is InstanceStatus.RUNNING
    assert instance.runtime is None


def test_runtime_with_only_uptime_counts() -> None:
    assert parse_runtime({"uptime": 3}) is not None
    assert parse_runtime({"gpus": []}) is None
    assert parse_runtime(None) is None


def test_odd_timestamps_and_missing_env(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(
        sim, createdAt="2026-03-13T20:00:00", startedAt="yesterday", env=None, ports=None
    )
    instance = client.instances.get(instance_id)
    assert instance.created_at == datetime(2026, 3, 13, 20, tzinfo=UTC)
    assert instance.started_at is None
    assert instance.env == {} and instance.ports == ()


def test_offset_timestamps_become_utc(sim: RunPodSimulator, client: RunPodClient) -> None:
    instance_id = _running(sim, createdAt="2026-03-13T22:00:00+02:00")
    created = client.instances.get(instance_id).created_at
    assert created == datetime(2026, 3, 13, 20, tzinfo=UTC)
    assert created is not None and created.utcoffset() is not None


def test_a_pod_without_an_id_is_refused(sim: RunPodSimulator, client: RunPodClient) -> None:
    _running(sim, id=None)
    with pytest.raises(errors.RunPodError, match="no id"):
        client.instances.list()


def test_registries_round_trip_without_the_password(
    sim: RunPodSimulator, client: RunPodClient
) -> None:
    created = client.registries.create("ghcr", "robot", "p4ssw0rd")
    assert client.registries.list() == [created]
    assert created.name == "ghcr"
    assert sim.requests[0].body["password"] == "***"
