"""A StorageClass's `parameters.dataCenter` is anyone's to write who may make a class:
one that is no data center RunPod's catalog names (a path, 5 000 characters, a newline,
a typo) is never POSTed; the claim gets a `ProvisioningFailed` Event saying why, its
text escaped and cut, and the log line carries no raw newline."""

from __future__ import annotations

import logging

import pytest

from reconciler.demo.sandbox import Sandbox

from .test_claims import add_claim, add_class, claim, volume_calls


@pytest.mark.parametrize(
    "datacenter", ["../../etc", "EU-RO-1\nforged line", "A" * 5000, "XX-NOPE-9"]
)
def test_a_data_center_that_is_none_is_never_posted(box: Sandbox, caplog, datacenter) -> None:
    add_class(box, parameters={"dataCenter": datacenter})
    add_claim(box)
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            box.tick()
    assert [c for c in volume_calls(box) if c[0] == "POST"] == []
    events = [
        e for e in box.kube_sim.list("events", "default") if e["reason"] == "ProvisioningFailed"
    ]
    assert events, "the claim is not told why"
    message = events[0]["message"]
    assert "parameters.dataCenter" in message and "catalog" in message
    assert "\n" not in message and len(message) < 400
    assert claim(box)["status"]["phase"] == "Pending"
    assert not any("\nforged line" in r.getMessage() for r in caplog.records)


def test_a_data_center_the_catalog_names_is_posted(box: Sandbox) -> None:
    add_class(box, parameters={"dataCenter": "EU-RO-1"})
    add_claim(box)
    box.tick()
    assert [c[2]["dataCenter"] for c in volume_calls(box) if c[0] == "POST"] == ["EU-RO-1"]


def test_a_reclaim_policy_set_on_the_claim_does_not_override_its_class(box: Sandbox) -> None:
    """The class says Retain; the claim's author writes Delete before the volume is
    asked for: the hold records the class's, and so does the PV."""
    add_class(box, reclaimPolicy="Retain")
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "ckpt",
            "namespace": "default",
            "annotations": {"runpod.io/reclaim-policy": "Delete"},
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "20Gi"}},
            "storageClassName": "runpod",
        },
    }
    made = box.kube_sim.put("persistentvolumeclaims", body)
    box.tick()
    box.tick()
    pv = box.kube_sim.get("persistentvolumes", None, f"pvc-{made['metadata']['uid']}")
    assert pv is not None
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
