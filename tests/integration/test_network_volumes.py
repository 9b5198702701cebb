"""Pods that mount an existing network volume (`runpod.io/network-volume-id`, one the
reconciler made for a claim of the pod's namespace): the
account's volumes are listed once, only on a tick that creates such a pod; the create
carries the mount and only the volume's data center; a volume RunPod does not have is
the pod's reason before any create is sent, and spends no candidate of anyone else's
(RunPod's 400 for it reads like want of stock); a steady tick lists nothing."""

from __future__ import annotations

from reconciler.core.resources.volume_objects import volume_name
from reconciler.demo.sandbox import Sandbox

from .test_limits import status_reason


def calls(box: Sandbox, method: str, path: str) -> list[dict]:
    return [r.body for r in box.runpod_sim.requests if (r.method, r.path) == (method, path)]


def test_a_pod_on_a_network_volume_is_created_in_its_data_center_only(box: Sandbox) -> None:
    claim = box.kube_sim.put(
        "persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "datasets", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "50G"}},
                "storageClassName": "manual",
            },
        },
    )
    name = volume_name(box.settings.owner_id, claim["metadata"]["uid"])
    volume = box.runpod_sim.add_volume(name, 50, "US-KS-2")
    box.add_pod(
        "reader",
        annotations={
            "runpod.io/network-volume-id": volume.id,
            "runpod.io/volume-mount-path": "/data",
        },
    )
    box.tick()
    [body] = calls(box, "POST", "/v2/pods")
    assert body["mounts"] == {"network": [{"volumeId": volume.id, "path": "/data"}]}
    assert body["dataCenterIds"] == ["US-KS-2"]
    assert box.instance_for(box.pod("reader") or {})["dataCenterId"] == "US-KS-2"
    assert len(calls(box, "GET", "/v2/network-volumes")) == 1
    box.advance(60)
    box.tick()
    box.tick()
    assert len(calls(box, "GET", "/v2/network-volumes")) == 1  # steady: no list


def test_a_volume_runpod_does_not_have_is_a_reason_and_spends_nothing(box: Sandbox) -> None:
    box.add_pod("lost", annotations={"runpod.io/network-volume-id": "vol-gone"})
    box.tick()
    assert status_reason(box, "lost") == "NetworkVolumeUnavailable"
    assert calls(box, "POST", "/v2/pods") == []
    box.add_pod("other")  # the refusal left no mark on where others may be created
    box.tick()
    assert box.instance_for(box.pod("other") or {}) is not None
    assert status_reason(box, "lost") == "NetworkVolumeUnavailable"
