"""The protobuf wire schema (`reconciler/sim/kube/protobuf_schema.py`) is what its generator
writes from the Go API types of the Kubernetes release the realk8s tier builds, and the
fields the first, hand-run generation dropped are read as kube-apiserver reads them:
a field whose protobuf tag has no `opt` label (PodResourceClaim.name,
PersistentVolumeClaimTemplate.spec) and meta/v1's Preconditions (uid and resourceVersion),
not core/v1's message of the same name (uid only).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from reconciler.sim.kube import protobuf_schema_gen
from reconciler.sim.kube.protobuf import CONTENT_TYPE, decode_object
from reconciler.sim.kube.simulator import KubeSimulator

GO_MOD = Path(__file__).parents[1] / "realk8s" / "gobuild" / "kube" / "go.mod"


def test_the_schema_is_what_the_generator_writes_from_the_go_types() -> None:
    try:
        text = protobuf_schema_gen.generate()
    except FileNotFoundError as missing:
        pytest.skip(
            f"the Go sources of k8s.io/api {protobuf_schema_gen.VERSION} are not in the module "
            f"cache and cannot be downloaded (python -m tests.realk8s.build puts them there): "
            f"{missing}"
        )
    assert protobuf_schema_gen.TARGET.read_text() == text, (
        "protobuf_schema.py differs from its generator's output: "
        "python -m reconciler.sim.kube.protobuf_schema_gen"
    )


def test_the_generator_reads_the_release_the_real_plane_is_built_from() -> None:
    """So CI's realk8s build has put those very sources in the module cache, and the
    simulator reads the wire of the API server it is judged against."""
    pinned = {
        module: re.search(rf"^\s*{module} => {module} (\S+)$", GO_MOD.read_text(), re.M)
        for module in ("k8s.io/api", "k8s.io/apimachinery")
    }
    assert {m: found and found.group(1) for m, found in pinned.items()} == {
        "k8s.io/api": protobuf_schema_gen.VERSION,
        "k8s.io/apimachinery": protobuf_schema_gen.VERSION,
    }


def _varint(value: int) -> bytes:
    out = b""
    while value > 0x7F:
        out += bytes([value & 0x7F | 0x80])
        value >>= 7
    return out + bytes([value])


def _f(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + _f(1, _f(1, api_version) + _f(2, kind)) + _f(2, raw)


def test_a_job_keeps_its_pod_resource_claim_name_and_its_ephemeral_claim_spec() -> None:
    claim = _f(1, "gpu") + _f(4, "gpu-template")  # PodResourceClaim: name, template name
    quantity = _f(1, "1Gi")  # resource.Quantity's string
    requests = _f(2, _f(1, "storage") + _f(2, quantity))  # VolumeResourceRequirements
    claim_spec = _f(1, "ReadWriteOnce") + _f(2, requests)  # PersistentVolumeClaimSpec
    ephemeral = _f(1, _f(2, claim_spec))  # volumeClaimTemplate: PVC template's spec
    volume = _f(1, "scratch") + _f(2, _f(29, ephemeral))  # name; VolumeSource (inlined)
    pod_spec = _f(1, volume) + _f(39, claim)
    job = _f(2, _f(6, _f(2, pod_spec)))  # spec.template.spec

    decoded: dict[str, Any] = decode_object(_envelope("batch/v1", "Job", job))

    spec = decoded["spec"]["template"]["spec"]
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
    assert spec["volumes"] == [
        {
            "name": "scratch",
            "ephemeral": {
                "volumeClaimTemplate": {
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    }
                }
            },
        }
    ]


def test_an_eviction_with_a_stale_resource_version_precondition_is_a_conflict(
    sim: KubeSimulator,
) -> None:
    sim.create_pod(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
    )
    preconditions = _f(2, "1")  # metav1.Preconditions.resourceVersion
    eviction = _f(1, _f(1, "p")) + _f(2, _f(2, preconditions))  # metadata; deleteOptions
    with sim.api_client() as api_client:
        response = api_client.call_api(
            "POST",
            sim.base_url + "/api/v1/namespaces/default/pods/p/eviction",
            header_params={"Content-Type": CONTENT_TYPE, "Authorization": f"Bearer {sim.token}"},
            body=_envelope("policy/v1", "Eviction", eviction),
        )
        answer = response.read().decode()
    assert response.status == 409, answer
    assert "Precondition failed: ResourceVersion in precondition: 1" in answer
    assert sim.get("pods", "default", "p") is not None
