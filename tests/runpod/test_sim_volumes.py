"""The simulated RunPod's network volumes, as the contract has them: creation within
the size bounds and in a known data center, a grow-only PATCH that cannot move the
volume or change its tier, a DELETE refused while any pod (stopped too) mounts it, pods
placed only in their volume's data center on the secure cloud, a pod's network mount
fixed at create, and storage billed at each moment's size until the volume is gone."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, RTX_4090

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def call(sim: RunPodSimulator, method: str, path: str, body: Any = None) -> requests.Response:
    return requests.request(method, f"{sim.base_url}{path}", json=body, headers=AUTH, timeout=5)


def make_volume(sim: RunPodSimulator, **fields: Any) -> dict[str, Any]:
    body = {"name": "ckpt", "size": 20, "dataCenter": "EU-RO-1", **fields}
    answer = call(sim, "POST", "/v2/network-volumes", body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def make_pod(sim: RunPodSimulator, **fields: Any) -> requests.Response:
    body = {"name": "trainer", "image": "img:1", "gpu": {"id": RTX_4090}, **fields}
    return call(sim, "POST", "/v2/pods", body)


def mount(volume: dict[str, Any], path: str = "/runpod-volume") -> dict[str, Any]:
    return {"network": [{"volumeId": volume["id"], "path": path}]}


def test_a_created_volume_is_listed_and_read_with_the_contracts_fields(sim):
    volume = make_volume(sim)
    assert volume == {
        "id": volume["id"],
        "name": "ckpt",
        "size": 20,
        "dataCenter": "EU-RO-1",
        "type": "STANDARD",  # the data center's default tier when none is asked for
    }
    assert call(sim, "GET", "/v2/network-volumes").json() == {"networkVolumes": [volume]}
    assert call(sim, "GET", f"/v2/network-volumes/{volume['id']}").json() == volume
    assert call(sim, "GET", "/v2/network-volumes/nope").status_code == 404


def test_the_list_lags_behind_a_create_and_only_a_404_by_id_says_gone(sim):
    """A client that took a volume its list omits for gone would make it twice (or drop
    its PV): the list lags as the pod list does, the id answers at once."""
    sim.account.set_listing_lag(30)
    volume = make_volume(sim)
    assert call(sim, "GET", "/v2/network-volumes").json() == {"networkVolumes": []}
    assert call(sim, "GET", f"/v2/network-volumes/{volume['id']}").json() == volume
    sim.advance(30)
    assert call(sim, "GET", "/v2/network-volumes").json() == {"networkVolumes": [volume]}
    lagging = make_volume(sim, name="next")
    sim.account.catch_up_listing()
    listed = call(sim, "GET", "/v2/network-volumes").json()["networkVolumes"]
    assert [v["id"] for v in listed] == [volume["id"], lagging["id"]]
    assert call(sim, "DELETE", f"/v2/network-volumes/{volume['id']}").status_code == 204
    assert call(sim, "GET", f"/v2/network-volumes/{volume['id']}").status_code == 404


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"size": 9}, 422),
        ({"size": 4097}, 422),
        ({"size": 20.5}, 422),
        ({"type": "FAST"}, 422),
        ({"region": "EU"}, 422),
        ({"name": ""}, 422),
        ({"dataCenter": "MARS-1"}, 400),
    ],
)
def test_a_create_off_the_contract_is_refused(sim, fields, status):
    body = {"name": "ckpt", "size": 20, "dataCenter": "EU-RO-1", **fields}
    assert call(sim, "POST", "/v2/network-volumes", body).status_code == status
    assert sim.volumes == {}


def test_the_bounds_themselves_are_allowed(sim):
    assert make_volume(sim, size=10)["size"] == 10
    assert make_volume(sim, size=4096, type="HIGH_PERFORMANCE")["size"] == 4096


def test_a_volume_grows_and_never_shrinks(sim):
    volume = make_volume(sim, size=50)
    path = f"/v2/network-volumes/{volume['id']}"
    assert call(sim, "PATCH", path, {"size": 80}).json()["size"] == 80
    assert call(sim, "PATCH", path, {"size": 80}).status_code == 200  # the same size is fine
    shrink = call(sim, "PATCH", path, {"size": 60})
    assert shrink.status_code == 400
    assert "cannot be reduced" in shrink.json()["detail"]
    assert call(sim, "PATCH", path, {"size": 5000}).status_code == 422
    assert call(sim, "GET", path).json()["size"] == 80


@pytest.mark.parametrize("body", [{}, {"dataCenter": "US-KS-2"}, {"type": "HIGH_PERFORMANCE"}])
def test_only_name_and_size_can_change(sim, body):
    volume = make_volume(sim)
    assert call(sim, "PATCH", f"/v2/network-volumes/{volume['id']}", body).status_code == 422
    assert sim.volumes[volume["id"]] == volume


def test_a_delete_is_refused_while_any_pod_mounts_the_volume(sim):
    volume = make_volume(sim)
    pod = make_pod(sim, mounts=mount(volume)).json()
    path = f"/v2/network-volumes/{volume['id']}"
    refused = call(sim, "DELETE", path)
    assert refused.status_code == 400
    assert pod["id"] in refused.json()["detail"]
    sim.advance(60)
    call(sim, "POST", f"/v2/pods/{pod['id']}/action", {"action": "stop"})
    assert call(sim, "DELETE", path).status_code == 400  # a stopped pod keeps it attached
    assert call(sim, "DELETE", f"/v2/pods/{pod['id']}").status_code == 204
    assert call(sim, "DELETE", path).status_code == 204
    assert call(sim, "GET", path).status_code == 404
    assert call(sim, "DELETE", path).status_code == 404


def test_a_pod_with_a_volume_is_placed_in_the_volumes_data_center(sim):
    volume = make_volume(sim, dataCenter="US-KS-2")  # not where most 4090s are free
    pod = make_pod(sim, mounts=mount(volume))
    assert pod.status_code == 201, pod.text
    assert pod.json()["dataCenterId"] == "US-KS-2"
    assert pod.json()["mounts"] == mount(volume)


def test_a_pod_asking_for_another_data_center_than_its_volumes_is_refused(sim):
    volume = make_volume(sim, dataCenter="US-KS-2")
    refused = make_pod(sim, mounts=mount(volume), dataCenterIds=["US-TX-3"])
    assert refused.status_code == 400
    assert "US-KS-2" in refused.json()["detail"]
    both = make_pod(sim, mounts=mount(volume), dataCenterIds=["US-TX-3", "US-KS-2"])
    assert both.json()["dataCenterId"] == "US-KS-2"


def test_no_capacity_in_the_volumes_data_center_is_no_capacity(sim):
    volume = make_volume(sim, dataCenter="US-KS-2")
    sim.account.set_capacity(RTX_4090, "US-KS-2", 0)
    refused = make_pod(sim, mounts=mount(volume))
    assert refused.status_code == 400
    assert "no capacity" in refused.json()["detail"]


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"mounts": {"network": [{"volumeId": "nope", "path": "/data"}]}}, "not found"),
        ({"cloud": "COMMUNITY"}, "SECURE"),
        ({"mounts": "relative"}, "absolute"),
    ],
)
def test_pod_creates_a_network_mount_cannot_have(sim, fields, detail):
    volume = make_volume(sim)
    fields = {"mounts": mount(volume), **fields}
    if fields["mounts"] == "relative":
        fields["mounts"] = mount(volume, path="data")
    refused = make_pod(sim, **fields)
    assert refused.status_code == 400
    assert detail in refused.json()["detail"]
    assert sim.instances == {}


def test_a_pods_network_mount_is_fixed_at_create(sim):
    volume, other = make_volume(sim), make_volume(sim, name="other")
    pod = make_pod(sim, mounts=mount(volume)).json()
    path = f"/v2/pods/{pod['id']}"
    assert call(sim, "PATCH", path, {"mounts": mount(other)}).status_code == 400
    assert call(sim, "PATCH", path, {"mounts": {"network": []}}).status_code == 400
    assert call(sim, "PATCH", path, {"mounts": {}}).status_code == 200
    moved = call(sim, "PATCH", path, {"mounts": mount(volume, "/data")})
    assert moved.json()["mounts"] == mount(volume, "/data")
    plain = make_pod(sim).json()
    late = call(sim, "PATCH", f"/v2/pods/{plain['id']}", {"mounts": mount(volume)})
    assert late.status_code == 400


def test_storage_bills_at_each_moments_size_until_the_volume_is_deleted(sim, clock):
    hour = clock.now().replace(minute=0, second=0, microsecond=0)
    sim.advance((hour - clock.now()).total_seconds() + 3600)  # to the next whole hour
    standard = make_volume(sim, size=100)
    fast = make_volume(sim, size=10, type="HIGH_PERFORMANCE")
    sim.advance(3600)
    call(sim, "PATCH", f"/v2/network-volumes/{standard['id']}", {"size": 200})
    sim.advance(3600)
    assert call(sim, "DELETE", f"/v2/network-volumes/{standard['id']}").status_code == 204
    sim.advance(3600)
    answer = call(sim, "GET", "/v2/billing/network-volumes?bucketSize=hour&lastN=4").json()
    by_volume: dict[str, list[dict[str, Any]]] = {}
    for record in answer["records"]:
        by_volume.setdefault(record["networkVolumeId"], []).append(record)
    hourly = 0.07 / 720
    assert [r["standardAmount"] for r in by_volume[standard["id"]]] == [
        pytest.approx(100 * hourly, abs=1e-6),
        pytest.approx(200 * hourly, abs=1e-6),
    ]
    assert all(r["highPerformanceAmount"] == 0 for r in by_volume[standard["id"]])
    assert [r["highPerformanceAmount"] for r in by_volume[fast["id"]]] == [
        pytest.approx(10 * 0.14 / 720, abs=1e-6)
    ] * 3  # and nothing for the hour that has not begun to pass
    assert answer["metadata"]["uniqueNetworkVolumeCount"] == 2
    one = call(sim, "GET", f"/v2/billing/network-volumes?lastN=1&networkVolumeId={fast['id']}")
    assert {r["networkVolumeId"] for r in one.json()["records"]} == {fast["id"]}


def test_a_delete_that_keeps_billing_hides_the_volume_until_deleted_again(sim, clock):
    """The leak a billing audit must catch: 204, gone from the list and the id, and
    billed on; a second DELETE of the id ends the bill."""
    hour = clock.now().replace(minute=0, second=0, microsecond=0)
    sim.advance((hour - clock.now()).total_seconds() + 3600)
    volume = make_volume(sim, size=100)
    sim.faults.volume_delete_keeps_billing()
    assert call(sim, "DELETE", f"/v2/network-volumes/{volume['id']}").status_code == 204
    assert call(sim, "GET", "/v2/network-volumes").json() == {"networkVolumes": []}
    assert call(sim, "GET", f"/v2/network-volumes/{volume['id']}").status_code == 404
    sim.advance(2 * 3600)
    bill = "/v2/billing/network-volumes?bucketSize=hour&lastN=3"
    billed = [r["networkVolumeId"] for r in call(sim, "GET", bill).json()["records"]]
    assert billed == [volume["id"]] * 2  # both hours since the DELETE
    assert call(sim, "DELETE", f"/v2/network-volumes/{volume['id']}").status_code == 204
    sim.advance(2 * 3600)
    assert call(sim, "GET", bill).json()["records"] == []
