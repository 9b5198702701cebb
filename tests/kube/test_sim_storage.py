"""The Kubernetes simulator's storage, as the API server and its volume controllers
behave, through the official client over HTTP: StorageClass and CSIDriver defaults and
immutable fields; claim and volume validation (access modes, positive canonical
quantities, one volume source); the PV controller's binding of a provisioner's PV to its
claim (claimRef, phases, bind-completed, bound-by-controller), of a static PV, the
storage-provisioner cue and WaitForFirstConsumer's wait for selected-node; Released and
Lost; the protection finalizers; and expansion: allowed only for a bound claim of a
class that allows it, never below status.capacity, status holding only what the API
knows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.sim.kube.simulator import KubeSimulator

PROVISIONER = "runpod.io/network-volume"
DRIVER = "network-volume.runpod.io"  # a CSI driver's name is a DNS subdomain: no slash
MERGE = {"_content_type": "application/merge-patch+json"}


@pytest.fixture
def api(sim: KubeSimulator) -> Iterator[client.ApiClient]:
    with sim.api_client() as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def storage(api: client.ApiClient) -> client.StorageV1Api:
    return client.StorageV1Api(api)


def make_class(storage: client.StorageV1Api, name: str = "runpod", **fields: Any) -> Any:
    body = {"metadata": {"name": name}, "provisioner": PROVISIONER, **fields}
    return storage.create_storage_class(body)


def make_claim(core: client.CoreV1Api, name: str = "data", size: str = "20Gi", **spec: Any) -> Any:
    body = {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": size}},
            "storageClassName": "runpod",
            **spec,
        },
    }
    return core.create_namespaced_persistent_volume_claim("default", body)


def make_volume(core: client.CoreV1Api, name: str, claim: Any = None, **spec: Any) -> Any:
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "20Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "runpod",
            "csi": {"driver": DRIVER, "volumeHandle": f"vol-{name}"},
            **spec,
        },
    }
    if claim is not None:
        meta = claim.metadata
        body["spec"]["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": meta.namespace,
            "name": meta.name,
            "uid": meta.uid,
        }
    return core.create_persistent_volume(body)


def claim(core: client.CoreV1Api, name: str = "data") -> Any:
    return core.read_namespaced_persistent_volume_claim(name, "default")


def volume(core: client.CoreV1Api, name: str) -> Any:
    return core.read_persistent_volume(name)


def invalid(call: Any, status: int = 422) -> str:
    with pytest.raises(ApiException) as raised:
        call()
    assert raised.value.status == status, raised.value.body
    return str(raised.value.body)


def test_a_class_and_a_driver_get_their_defaults_and_keep_what_cannot_change(sim, storage):
    cls = make_class(storage, parameters={"dataCenter": "EU-RO-1"})
    assert (cls.reclaim_policy, cls.volume_binding_mode) == ("Delete", "Immediate")
    assert "provisioner" in invalid(
        lambda: storage.patch_storage_class("runpod", {"provisioner": "other"}, **MERGE)
    )
    assert "parameters" in invalid(
        lambda: storage.patch_storage_class("runpod", {"parameters": {"dataCenter": "X"}}, **MERGE)
    )
    storage.patch_storage_class("runpod", {"allowVolumeExpansion": True}, **MERGE)
    bare = requests.post(
        f"{sim.base_url}/apis/storage.k8s.io/v1/storageclasses",
        json={"metadata": {"name": "bare"}},
        headers={"Authorization": f"Bearer {sim.token}"},
        timeout=5,
    )
    assert bare.status_code == 422
    assert "provisioner" in bare.text
    driver = storage.create_csi_driver({"metadata": {"name": DRIVER}, "spec": {}})
    assert driver.spec.attach_required is True
    assert driver.spec.volume_lifecycle_modes == ["Persistent"]
    assert "attachRequired" in invalid(
        lambda: storage.patch_csi_driver(DRIVER, {"spec": {"attachRequired": False}}, **MERGE)
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"accessModes": []}, "spec.accessModes"),
        ({"accessModes": ["ReadWriteOncePod", "ReadWriteMany"]}, "ReadWriteOncePod"),
        ({"accessModes": ["WriteSometimes"]}, "spec.accessModes"),
        ({"resources": {"requests": {}}}, "spec.resources[storage]"),
        ({"resources": {"requests": {"storage": "0"}}}, "greater than zero"),
    ],
)
def test_a_claim_off_the_rules_is_invalid(core, spec, field):
    assert field in invalid(lambda: make_claim(core, **spec))


def test_quantities_are_stored_canonical_and_a_bad_one_is_a_400(core):
    assert make_claim(core, size="20480Mi").spec.resources.requests["storage"] == "20Gi"
    assert make_claim(core, "dec", size="10000M").spec.resources.requests["storage"] == "10G"
    invalid(lambda: make_claim(core, "bad", size="ten"), status=400)


def test_a_volume_needs_one_source_with_a_driver_and_a_handle(core):
    assert "volume type" in invalid(lambda: make_volume(core, "pv-1", csi=None))
    slash = {"driver": PROVISIONER, "volumeHandle": "v"}
    assert "spec.csi.driver" in invalid(lambda: make_volume(core, "pv-5", csi=slash))
    two = {"nfs": {"server": "nfs", "path": "/"}}
    assert "more than 1 volume type" in invalid(lambda: make_volume(core, "pv-3", **two))
    made = make_volume(core, "pv-4")
    assert "persistentvolumesource" in invalid(
        lambda: core.patch_persistent_volume(
            "pv-4", {"spec": {"csi": {"volumeHandle": "other"}}}, **MERGE
        )
    )
    assert made.metadata.finalizers == ["kubernetes.io/pv-protection"]


def test_a_provisioners_volume_binds_its_claim(core, storage):
    make_class(storage)
    pending = make_claim(core)
    assert pending.status.phase == "Pending"
    assert pending.metadata.finalizers == ["kubernetes.io/pvc-protection"]
    annotations = claim(core).metadata.annotations  # the controller's, after the create
    assert annotations["volume.kubernetes.io/storage-provisioner"] == PROVISIONER
    assert annotations["volume.beta.kubernetes.io/storage-provisioner"] == PROVISIONER
    make_volume(core, "pvc-1", claim=pending, capacity={"storage": "20Gi"})
    bound = claim(core)
    assert bound.spec.volume_name == "pvc-1"
    assert bound.status.phase == "Bound"
    assert bound.status.capacity == {"storage": "20Gi"}
    assert bound.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert bound.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    pv = volume(core, "pvc-1")
    assert pv.status.phase == "Bound"
    assert pv.spec.claim_ref.uid == pending.metadata.uid
    assert "pv.kubernetes.io/bound-by-controller" not in (pv.metadata.annotations or {})


def test_wait_for_first_consumer_waits_for_the_selected_node(core, storage):
    make_class(storage, volumeBindingMode="WaitForFirstConsumer")
    make_claim(core)
    waiting = claim(core)
    assert "volume.kubernetes.io/storage-provisioner" not in (waiting.metadata.annotations or {})
    selected = {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-1"}}}
    core.patch_namespaced_persistent_volume_claim("data", "default", selected, **MERGE)
    cue = claim(core).metadata.annotations
    assert cue["volume.kubernetes.io/storage-provisioner"] == PROVISIONER


def test_a_static_volume_binds_the_smallest_fitting_claim_of_its_class(core, storage):
    make_class(storage, provisioner="kubernetes.io/no-provisioner")
    make_volume(core, "small", capacity={"storage": "5Gi"})
    make_volume(core, "big", capacity={"storage": "100Gi"})
    make_volume(core, "fits", capacity={"storage": "30Gi"})
    assert volume(core, "fits").status.phase == "Available"
    make_claim(core)
    assert claim(core).spec.volume_name == "fits"
    assert volume(core, "fits").metadata.annotations["pv.kubernetes.io/bound-by-controller"]
    assert volume(core, "big").status.phase == "Available"


def test_a_claim_naming_its_volume_binds_it_and_may_set_the_name_only_once(core, storage):
    make_class(storage)
    make_volume(core, "mine", storageClassName="runpod")
    made = make_claim(core, volumeName="mine")
    assert claim(core).status.phase == "Bound"
    assert volume(core, "mine").spec.claim_ref.uid == made.metadata.uid
    assert "immutable" in invalid(
        lambda: core.patch_namespaced_persistent_volume_claim(
            "data", "default", {"spec": {"volumeName": "other"}}, **MERGE
        )
    )


def test_a_deleted_claim_waits_for_its_pods_and_then_releases_its_volume(core, storage):
    make_class(storage, reclaimPolicy="Retain")
    made = make_claim(core)
    make_volume(core, "pvc-1", claim=made, persistentVolumeReclaimPolicy="Retain")
    pod = {
        "metadata": {"name": "user"},
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    core.create_namespaced_pod("default", pod)
    core.delete_namespaced_persistent_volume_claim("data", "default")
    assert claim(core).metadata.deletion_timestamp is not None  # the pod still uses it
    core.delete_namespaced_pod("user", "default", grace_period_seconds=0)
    invalid(lambda: claim(core), status=404)
    released = volume(core, "pvc-1")
    assert released.status.phase == "Released"  # Retain: it stays
    core.delete_persistent_volume("pvc-1")
    invalid(lambda: volume(core, "pvc-1"), status=404)  # not Bound: the finalizer goes


def test_a_bound_volume_is_kept_while_its_claim_lives(core, storage):
    make_class(storage)
    made = make_claim(core)
    make_volume(core, "pvc-1", claim=made)
    core.delete_persistent_volume("pvc-1")
    assert volume(core, "pvc-1").metadata.deletion_timestamp is not None
    core.delete_namespaced_persistent_volume_claim("data", "default")
    invalid(lambda: volume(core, "pvc-1"), status=404)


def test_a_claim_whose_volume_vanished_is_lost(core, storage):
    make_class(storage)
    made = make_claim(core)
    make_volume(core, "pvc-1", claim=made)
    # Someone strips the finalizer, as `kubectl patch` can.
    core.patch_persistent_volume("pvc-1", {"metadata": {"finalizers": None}}, **MERGE)
    core.delete_persistent_volume("pvc-1")
    assert claim(core).status.phase == "Lost"


def test_a_claim_grows_only_when_bound_and_its_class_allows_it(core, storage):
    make_class(storage)
    grow = {"spec": {"resources": {"requests": {"storage": "40Gi"}}}}
    make_claim(core)
    assert "immutable" in invalid(  # validation refuses it before the resize plugin would
        lambda: core.patch_namespaced_persistent_volume_claim("data", "default", grow, **MERGE)
    )
    make_volume(core, "pvc-1", claim=claim(core))
    assert "must support resize" in invalid(
        lambda: core.patch_namespaced_persistent_volume_claim("data", "default", grow, **MERGE),
        status=403,
    )
    storage.patch_storage_class("runpod", {"allowVolumeExpansion": True}, **MERGE)
    grown = core.patch_namespaced_persistent_volume_claim("data", "default", grow, **MERGE)
    assert grown.spec.resources.requests["storage"] == "40Gi"
    assert grown.status.capacity == {"storage": "20Gi"}  # until the resizer says so
    shrink = {"spec": {"resources": {"requests": {"storage": "10Gi"}}}}
    assert "status.capacity" in invalid(
        lambda: core.patch_namespaced_persistent_volume_claim("data", "default", shrink, **MERGE)
    )


def test_a_claims_status_holds_only_what_the_api_knows(core, storage):
    make_class(storage)
    make_claim(core)
    for status in (
        {"allocatedResources": {"cpu": "1"}},
        {"allocatedResourceStatuses": {"storage": "Shrinking"}},
    ):
        invalid(
            lambda status=status: core.patch_namespaced_persistent_volume_claim_status(
                "data", "default", {"status": status}, **MERGE
            )
        )
    ok = {
        "allocatedResources": {"storage": "40Gi"},
        "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
    }
    core.patch_namespaced_persistent_volume_claim_status("data", "default", {"status": ok}, **MERGE)
    assert claim(core).status.allocated_resources == {"storage": "40Gi"}
