"""Every dollar through the caps before its request, through both simulators over real
HTTP: a pod's container disk is priced with its GPU (RunPod's published storage prices)
for its max price and both caps; a claim's volume create goes through the global and
its namespace's cap (a resize too), and one refused is told on the claim naming the
cap; a GPU whose
catalog price cannot be read is never taken as free."""

from __future__ import annotations

import math
from typing import Any

import pytest

from reconciler.core.money.namespace_caps import MAX_HOURLY_SPEND_ANNOTATION
from reconciler.demo.sandbox import Sandbox
from reconciler.sim.kube.resources import PERSISTENT_VOLUME_CLAIMS

from .test_claims import add_claim, add_class, claim
from .test_limits import status_reason

RTX_4090 = "NVIDIA GeForce RTX 4090"


def _posts(box: Sandbox, path: str = "/v2/pods") -> list[dict]:
    return [r.body for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", path)]


def _namespace_cap(box: Sandbox, namespace: str, usd: str) -> None:
    box.ensure_namespace(namespace)
    obj = box.kube_sim.get("namespaces", None, namespace) or {}
    obj["metadata"]["annotations"] = {MAX_HOURLY_SPEND_ANNOTATION: usd}
    box.kube_sim.put("namespaces", obj)


def test_a_container_disk_is_priced_against_the_pods_max_price(box: Sandbox) -> None:
    """10 000 GB of container disk cost 1.37 USD/h at $0.10 per GB and month: with the
    cheapest GPU it is above a max price of 1.00, so nothing is created."""
    box.add_pod(
        "big", annotations={"runpod.io/max-price": "1.00", "runpod.io/container-disk-gb": "10000"}
    )
    assert not box.tick().errors
    assert _posts(box) == []
    assert status_reason(box, "big") == "UnsatisfiableGPURequest"
    told = [e["message"] for e in box.events("big") if e["reason"] == "UnsatisfiableGPURequest"]
    assert told and "10000 GB container disk" in told[0] and "1.00 USD/h" in told[0]


def test_a_container_disk_counts_in_the_namespace_cap(box: Sandbox) -> None:
    _namespace_cap(box, "team-a", "1.00")
    box.add_pod(
        "big",
        namespace="team-a",
        annotations={"runpod.io/max-price": "5", "runpod.io/container-disk-gb": "10000"},
    )
    assert not box.tick().errors
    assert _posts(box) == []
    told = [e["message"] for e in box.events("big", "team-a") if e["reason"] == "BudgetExceeded"]
    assert told and MAX_HOURLY_SPEND_ANNOTATION in told[0]
    # A small disk fits the same cap.
    box.add_pod("small", namespace="team-a", annotations={"runpod.io/container-disk-gb": "20"})
    box.advance(60)
    assert not box.tick().errors
    assert [b["name"].rsplit("-", 1)[0] for b in _posts(box)] == ["team-a-small"]


def _claims(box: Sandbox, namespace: str, count: int, size: str = "4096G") -> None:
    box.ensure_namespace(namespace)
    for index in range(count):
        box.kube_sim.put(
            "persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"data-{index}", "namespace": namespace},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "resources": {"requests": {"storage": size}},
                    "storageClassName": "runpod",
                },
            },
        )


def _refused(box: Sandbox, namespace: str) -> list[str]:
    return [
        e["message"]
        for e in box.kube_sim.list("events", namespace)
        if e["reason"] == "ProvisioningFailed"
    ]


def test_claim_volumes_go_through_both_caps_before_their_create(box: Sandbox) -> None:
    """6 x 4096 GB (0.39 USD/h each) were all made under a 1.00 global and a 0.05
    namespace cap: storage was only counted afterwards, against GPU pods."""
    box.configure(max_hourly_spend=1.0)
    add_class(box)
    _namespace_cap(box, "team-a", "0.05")
    _claims(box, "team-a", 6)
    _claims(box, "team-b", 6)
    box.tick()
    box.tick()
    made = _posts(box, "/v2/network-volumes")
    hourly = sum(v["size"] * 0.07 / 730 for v in made)
    assert len(made) == 2 and hourly <= 1.0, made  # team-b's first two; none of team-a's
    a_told, b_told = _refused(box, "team-a"), _refused(box, "team-b")
    assert len(a_told) == 6 and all(MAX_HOURLY_SPEND_ANNOTATION in m for m in a_told)
    assert len(b_told) == 4 and all("--max-hourly-spend" in m for m in b_told)
    box.tick()
    assert len(_posts(box, "/v2/network-volumes")) == 2
    assert len(_refused(box, "team-a")) == 6  # told once while the reason holds


def _catalog_price(box: Sandbox, gpu_id: str, value: Any) -> None:
    catalog = box.runpod_sim.account.catalog
    offer = catalog.gpus[gpu_id]
    price = dict(offer.price)
    if value is _MISSING:
        price.pop("secure")
    else:
        price["secure"] = value
    catalog.gpus[gpu_id] = type(offer)(**{**offer.__dict__, "price": price})


_MISSING = object()


@pytest.mark.parametrize(
    "value",
    [_MISSING, None, math.nan, "n/a", "0.69", 0, -0.69],
    ids=["missing", "null", "NaN", "text", "number-as-text", "zero", "negative"],
)
def test_a_gpu_without_a_usable_catalog_price_is_never_taken_as_free(
    box: Sandbox, value: Any
) -> None:
    """A price that is missing, null, NaN, a string, 0 or negative was read as $0: a pod
    with max-price 0.60 got a GPU billed at 0.69."""
    _catalog_price(box, RTX_4090, value)
    box.add_pod("cheap", annotations={"runpod.io/max-price": "0.60"})
    assert not box.tick().errors
    [body] = _posts(box)
    assert body["gpu"]["id"] != RTX_4090
    allowed_only = {"runpod.io/gpu-types": RTX_4090, "runpod.io/max-price": "0.60"}
    box.add_pod("only-that", annotations=allowed_only)
    box.advance(60)
    assert not box.tick().errors
    assert len(_posts(box)) == 1
    assert status_reason(box, "only-that") == "UnsatisfiableGPURequest"


def test_a_claims_resize_goes_through_the_caps_before_its_request(box: Sandbox) -> None:
    box.configure(max_hourly_spend=0.10)
    add_class(box, allowVolumeExpansion=True)
    add_claim(box)
    box.tick()
    grown = claim(box)
    grown["spec"]["resources"]["requests"]["storage"] = "4096G"
    box.kube_sim.store.update(PERSISTENT_VOLUME_CLAIMS, "default", "ckpt", grown)
    box.tick()
    assert [r for r in box.runpod_sim.requests if r.method == "PATCH"] == []
    [volume] = box.runpod_sim.volumes.values()
    assert volume["size"] == 22
    told = [
        e["message"]
        for e in box.kube_sim.list("events", "default")
        if e["reason"] == "VolumeResizeFailed"
    ]
    assert told and "--max-hourly-spend" in told[0]
