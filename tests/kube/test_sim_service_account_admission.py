"""The ServiceAccount admission plugin, as kube-apiserver runs it by default (seen on the
real plane of tests/realk8s): every pod that does not opt out gets its token as a
projected volume `kube-api-access-xxxxx`, random per pod, mounted read-only in each
container. So two pods of one template never have equal specs, which a client comparing
pods (an Instant Cluster's members) must allow for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from reconciler.sim.kube.simulator import KubeSimulator

MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture
def core() -> Iterator[client.CoreV1Api]:
    with KubeSimulator() as sim, sim.api_client() as api_client:
        yield client.CoreV1Api(api_client)


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "initContainers": [{"name": "fetch", "image": "busybox:1"}],
            "containers": [{"name": "main", "image": "python:3.11"}],
            **spec,
        },
    }


def test_each_pod_gets_its_own_token_volume_mounted_in_every_container(
    core: client.CoreV1Api,
) -> None:
    first = core.create_namespaced_pod("default", _pod("a"))
    second = core.create_namespaced_pod("default", _pod("b"))
    names = []
    for pod in (first, second):
        (volume,) = pod.spec.volumes
        assert volume.name.startswith("kube-api-access-") and len(volume.name) == 21
        assert volume.projected.sources[0].service_account_token.path == "token"
        for container in (*pod.spec.init_containers, *pod.spec.containers):
            (mount,) = container.volume_mounts
            assert (mount.name, mount.mount_path, mount.read_only) == (volume.name, MOUNT, True)
        assert pod.spec.service_account == pod.spec.service_account_name == "default"
        names.append(volume.name)
    assert names[0] != names[1]


def test_a_pod_that_opts_out_gets_no_token(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod("default", _pod("c", automountServiceAccountToken=False))
    assert not pod.spec.volumes
    assert not pod.spec.containers[0].volume_mounts
