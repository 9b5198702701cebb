"""The RunPod simulator's Instant Clusters, held to the v2 contract: the closed create body
(no registry, no cloud, no template id; 2 to 250 pods; one homogeneous shape), one data
center for the whole cluster, ranks and overlay addresses null until provisioning assigns
them (and not in creation order), members hidden from the pod list unless asked for and
refused on the pod routes, deletion of the cluster ending every member, and cluster
billing apart from pod billing (the current hour charged only for what has passed, each
billing route taking its own filter only)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from reconciler.core.contract import STOP_ON_EXIT_ENV, exit_code_marker
from reconciler.sim.runpod.simulator import RunPodSimulator

from .helpers import API_KEY, RTX_4090


@pytest.fixture
def http(sim: RunPodSimulator) -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {API_KEY}"
        yield session


def cluster_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "default-train",
        "type": "TRAINING",
        "compute": {"gpuTypeId": RTX_4090, "gpuCountPerPod": 1, "podCount": 2},
        "image": "ghcr.io/example/train:1.0",
        "env": {"A": "1"},
        "ports": ["22/tcp"],
    }
    body.update(overrides)
    return body


def create(sim: RunPodSimulator, http: requests.Session, **overrides: Any) -> dict[str, Any]:
    answer = http.post(f"{sim.base_url}/v2/clusters", json=cluster_body(**overrides))
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def members(sim: RunPodSimulator, http: requests.Session, cluster_id: str) -> list[dict]:
    answer = http.get(f"{sim.base_url}/v2/clusters/{cluster_id}/pods")
    assert answer.status_code == 200
    pods: list[dict] = answer.json()["pods"]
    return pods


@pytest.mark.parametrize(
    ("overrides", "status"),
    [
        ({"registry": "reg_1"}, 422),
        ({"cloud": "SECURE"}, 422),
        ({"templateId": "tpl"}, 422),
        ({"gpu": {"id": RTX_4090}}, 422),
        ({"type": "BATCH"}, 422),
        ({"compute": {"gpuTypeId": RTX_4090, "gpuCountPerPod": 1, "podCount": 1}}, 422),
        ({"compute": {"gpuTypeId": RTX_4090, "gpuCountPerPod": 1, "podCount": 251}}, 422),
        ({"compute": {"gpuTypeId": RTX_4090, "gpuCountPerPod": 0, "podCount": 2}}, 422),
        ({"compute": {"gpuTypeId": RTX_4090, "podCount": 2}}, 422),
        (
            {"compute": {"gpuTypeId": RTX_4090, "gpuCountPerPod": 1, "podCount": 2, "x": 1}},
            422,
        ),
        ({"image": None}, 422),
        ({"compute": {"gpuTypeId": "NVIDIA Nope", "gpuCountPerPod": 1, "podCount": 2}}, 400),
        ({"dataCenterIds": ["XX-NOPE-1"]}, 400),
        ({"ports": ["22/udp"]}, 400),
    ],
)
def test_the_create_body_is_closed_and_checked(
    sim: RunPodSimulator, http: requests.Session, overrides: dict[str, Any], status: int
) -> None:
    answer = http.post(f"{sim.base_url}/v2/clusters", json=cluster_body(**overrides))
    assert answer.status_code == status, answer.text
    assert sim.clusters == {} and sim.instances == {}


def test_a_body_without_an_image_is_refused(sim: RunPodSimulator, http: requests.Session) -> None:
    body = cluster_body()
    del body["image"]
    assert http.post(f"{sim.base_url}/v2/clusters", json=body).status_code == 400


def test_the_whole_cluster_fits_in_one_data_center_or_none_is_made(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    for datacenter in ("US-TX-3", "EU-RO-1", "US-KS-2"):
        # Four GPUs for clusters in all, but not in one place (clusters have a stock of
        # their own: plenty for pods changes nothing).
        sim.account.set_capacity(RTX_4090, datacenter, 3, "CLUSTER")
    compute = {"gpuTypeId": RTX_4090, "gpuCountPerPod": 2, "podCount": 2}
    refused = http.post(f"{sim.base_url}/v2/clusters", json=cluster_body(compute=compute))
    assert refused.status_code == 400 and "no capacity" in refused.json()["detail"]
    sim.account.set_capacity(RTX_4090, "EU-RO-1", 4, "CLUSTER")
    made = create(sim, http, compute=compute)
    assert made["dataCenterId"] == "EU-RO-1"
    assert {pod["dataCenterId"] for pod in members(sim, http, made["id"])} == {"EU-RO-1"}


def test_a_cluster_needs_the_balance_for_all_its_pods(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    sim.account.set_balance(1.0)  # one RTX 4090 pod an hour, not two
    assert http.post(f"{sim.base_url}/v2/clusters", json=cluster_body()).status_code == 402


def test_ranks_and_overlay_addresses_come_with_provisioning(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    made = create(sim, http, compute={"gpuTypeId": RTX_4090, "gpuCountPerPod": 1, "podCount": 3})
    assert made["pods"] == {"total": 3, "byStatus": {"PROVISIONING": 3}} and "primary" not in made
    early = members(sim, http, made["id"])
    assert [pod["cluster"] for pod in early] == [{"id": made["id"], "rank": None}] * 3
    assert all(pod["registry"] is None and pod["env"] == {"A": "1"} for pod in early)
    sim.advance(60)
    later = members(sim, http, made["id"])
    ranks = [pod["cluster"]["rank"] for pod in later]
    assert sorted(ranks) == [0, 1, 2] and ranks != [0, 1, 2]  # not in creation order
    assert len({pod["cluster"]["ip"] for pod in later}) == 3
    assert all(pod["cluster"]["ip"].startswith("10.65.") for pod in later)
    primary = next(pod for pod in later if pod["cluster"]["rank"] == 0)
    served = http.get(f"{sim.base_url}/v2/clusters/{made['id']}").json()
    assert served["primary"]["podId"] == primary["id"]
    assert served["pods"] == {"total": 3, "byStatus": {"RUNNING": 3}}


def test_members_are_listed_only_when_asked_for(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    made = create(sim, http)
    alone = sim.add_instance("standalone")
    listed = http.get(f"{sim.base_url}/v2/pods").json()["pods"]
    assert [pod["id"] for pod in listed] == [alone] and "cluster" not in listed[0]
    everything = http.get(f"{sim.base_url}/v2/pods", params={"includeClusterPods": "true"})
    assert {pod.get("cluster", {}).get("id") for pod in everything.json()["pods"]} == {
        None,
        made["id"],
    }
    assert http.get(f"{sim.base_url}/v2/pods?includeClusterPods=yes").status_code == 422
    assert [c["id"] for c in http.get(f"{sim.base_url}/v2/clusters").json()["clusters"]] == [
        made["id"]
    ]


def test_members_are_refused_on_the_pod_routes(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    made = create(sim, http)
    member = members(sim, http, made["id"])[0]["id"]
    base = f"{sim.base_url}/v2/pods/{member}"
    assert http.get(base).status_code == 200
    assert http.delete(base).status_code == 409
    assert http.patch(base, json={"env": {}}).status_code == 409
    assert http.post(f"{base}/action", json={"action": "terminate"}).status_code == 409
    assert http.post(f"{base}/action", json={"action": "stop"}).status_code == 409
    assert len(members(sim, http, made["id"])) == 2


def test_a_members_wrapper_cannot_stop_it(sim: RunPodSimulator, http: requests.Session) -> None:
    """The batch wrapper's stop is refused on a member (409), so a member whose process
    ended prints its marker and keeps running: nothing in the list says it ended."""
    made = create(sim, http, env={STOP_ON_EXIT_ENV: "n0nce"})
    sim.advance(60)
    member = members(sim, http, made["id"])[0]["id"]
    sim.exit_process(member, 0)
    sim.advance(5)
    assert http.get(f"{sim.base_url}/v2/pods/{member}").json()["status"] == "RUNNING"
    assert f"{exit_code_marker('n0nce')}0" in sim.logs.container_lines(member)
    served = http.get(f"{sim.base_url}/v2/clusters/{made['id']}").json()
    assert served["pods"] == {"total": 2, "byStatus": {"RUNNING": 2}}


def test_deleting_the_cluster_ends_every_member(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    made = create(sim, http)
    ids = [pod["id"] for pod in members(sim, http, made["id"])]
    assert http.delete(f"{sim.base_url}/v2/clusters/{made['id']}").status_code == 204
    assert http.get(f"{sim.base_url}/v2/clusters/{made['id']}").status_code == 404
    assert http.delete(f"{sim.base_url}/v2/clusters/{made['id']}").status_code == 404
    for pod_id in ids:
        assert http.get(f"{sim.base_url}/v2/pods/{pod_id}").json()["status"] == "TERMINATED"
    everything = http.get(f"{sim.base_url}/v2/pods", params={"includeClusterPods": "true"})
    assert everything.json()["pods"] == []


def test_rename_is_the_only_change(sim: RunPodSimulator, http: requests.Session) -> None:
    made = create(sim, http)
    url = f"{sim.base_url}/v2/clusters/{made['id']}"
    assert http.patch(url, json={"name": "renamed"}).json()["name"] == "renamed"
    assert http.patch(url, json={"image": "other"}).status_code == 422
    assert http.patch(url, json={}).status_code == 422


def test_clusters_are_billed_apart_from_pods(sim: RunPodSimulator, http: requests.Session) -> None:
    made = create(sim, http)
    sim.add_instance("standalone")
    sim.advance(3600)
    query = {"bucketSize": "hour", "lastN": "2"}
    pods = http.get(f"{sim.base_url}/v2/billing/pods", params=query).json()
    assert {record["podId"] for record in pods["records"]} <= {
        pod_id for pod_id, pod in sim.instances.items() if "cluster" not in pod
    }
    billed = http.get(f"{sim.base_url}/v2/billing/clusters", params=query).json()
    assert {record["clusterId"] for record in billed["records"]} == {made["id"]}
    totals = billed["metadata"]["totals"]
    assert totals["gpuAmount"] > 0 and totals["networkingAmount"] > 0
    assert totals["totalAmount"] == pytest.approx(
        totals["gpuAmount"] + totals["diskAmount"] + totals["networkingAmount"]
    )
    account = http.get(f"{sim.base_url}/v2/billing", params=query).json()["metadata"]["totals"]
    assert account["clusterGpuAmount"] == pytest.approx(totals["gpuAmount"])
    http.delete(f"{sim.base_url}/v2/clusters/{made['id']}")
    sim.advance(7200)
    after = http.get(f"{sim.base_url}/v2/billing/clusters", params=query).json()
    assert after["records"] == []  # a deleted cluster bills no more


def test_the_current_hour_bills_only_what_has_passed(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    hour = sim.clock.now().replace(minute=0, second=0, microsecond=0)
    sim.advance((hour - sim.clock.now()).total_seconds() + 3600)  # to a whole hour
    made = create(sim, http)
    sim.advance(1800)
    query = {"bucketSize": "hour", "lastN": "1", "clusterId": made["id"]}
    half = http.get(f"{sim.base_url}/v2/billing/clusters", params=query).json()
    sim.advance(1800)
    query["lastN"] = "2"
    whole = http.get(f"{sim.base_url}/v2/billing/clusters", params=query).json()
    [first] = half["records"]
    assert first["startTime"] == whole["records"][0]["startTime"]
    # Half of the hour had passed when it was read: half of the hour's charge, not all.
    assert first["gpuAmount"] == pytest.approx(whole["records"][0]["gpuAmount"] / 2, abs=1e-5)


@pytest.mark.parametrize("route", ["clusters", "pods", "network-volumes", ""])
def test_a_filter_of_another_billing_route_is_refused(
    sim: RunPodSimulator, http: requests.Session, route: str
) -> None:
    own = {"clusters": "clusterId", "pods": "podId", "network-volumes": "networkVolumeId"}
    url = f"{sim.base_url}/v2/billing" + (f"/{route}" if route else "")
    for name in ("podId", "clusterId", "networkVolumeId"):
        answer = http.get(url, params={name: "x1"})
        assert answer.status_code == (200 if own.get(route) == name else 400), (name, answer.text)


def test_a_cluster_whose_member_vanished_is_deleted(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    """A member gone behind the API's back (a host lost) leaves its cluster deletable:
    the DELETE ends the members left, and the vanished one's bill stays as it ended."""
    made = create(sim, http)
    first, second = (pod["id"] for pod in members(sim, http, made["id"]))
    sim.vanish(first)
    sim.advance(3600)
    billed = sim.billed(first)
    assert http.delete(f"{sim.base_url}/v2/clusters/{made['id']}").status_code == 204
    assert http.get(f"{sim.base_url}/v2/pods/{second}").json()["status"] == "TERMINATED"
    assert http.get(f"{sim.base_url}/v2/clusters/{made['id']}").status_code == 404
    sim.advance(3600)
    assert sim.billed(first) == billed


def test_a_delete_that_keeps_billing_hides_the_cluster_until_deleted_again(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    made = create(sim, http)
    sim.faults.cluster_delete_keeps_billing()
    assert http.delete(f"{sim.base_url}/v2/clusters/{made['id']}").status_code == 204
    assert sim.clusters == {}  # gone from every list
    query = {"bucketSize": "hour", "lastN": "1", "clusterId": made["id"]}
    sim.advance(5400)
    billed = http.get(f"{sim.base_url}/v2/billing/clusters", params=query).json()["records"]
    assert billed and billed[0]["gpuAmount"] > 0  # yet it bills on
    assert http.delete(f"{sim.base_url}/v2/clusters/{made['id']}").status_code == 204
    sim.advance(7200)
    after = http.get(f"{sim.base_url}/v2/billing/clusters", params=query).json()
    assert after["records"] == []


def _volume(sim: RunPodSimulator, http: requests.Session, datacenter: str) -> str:
    body = {"name": "ckpt", "size": 20, "dataCenter": datacenter}
    answer = http.post(f"{sim.base_url}/v2/network-volumes", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_a_network_volume_is_mounted_on_every_member_in_its_data_center(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    # The contract: CreateClusterRequest.mounts is `Mounts`, whose `network` is allowed.
    volume = _volume(sim, http, "EU-RO-1")
    mount = {"network": [{"volumeId": volume, "path": "/ckpt"}]}
    cluster = create(sim, http, mounts=mount)
    assert cluster["dataCenterId"] == "EU-RO-1"
    for member in members(sim, http, cluster["id"]):
        assert member["mounts"] == mount
        assert member["dataCenterId"] == "EU-RO-1"


def _network(volume: str, **extra: Any) -> dict[str, Any]:
    return {"network": [{"volumeId": volume, "path": "/ckpt"}], **extra}


@pytest.mark.parametrize(
    ("mounts", "where", "status", "detail"),
    [
        (lambda v: _network("vol_nope"), [], 400, "not found"),
        (_network, ["US-TX-3"], 400, "EU-RO-1"),
        (lambda v: _network(v, persistent={"size": 20, "path": "/w"}), [], 400, "exclusive"),
        (lambda v: {"network": [{"volumeId": v}]}, [], 422, ""),
        (lambda v: {"persistent": {"size": 20}}, [], 422, ""),
    ],
    ids=["unknown-volume", "other-datacenter", "both-kinds", "no-path", "persistent-no-path"],
)
def test_cluster_mounts_follow_the_contract(
    sim: RunPodSimulator,
    http: requests.Session,
    mounts: Callable[[str], dict[str, Any]],
    where: list[str],
    status: int,
    detail: str,
) -> None:
    body = cluster_body(mounts=mounts(_volume(sim, http, "EU-RO-1")))
    if where:
        body["dataCenterIds"] = where
    answer = http.post(f"{sim.base_url}/v2/clusters", json=body)
    assert answer.status_code == status, answer.text
    assert detail in answer.json()["detail"]
    assert sim.clusters == {}


def test_the_request_log_names_a_cluster_made_whatever_the_answer(
    sim: RunPodSimulator, http: requests.Session
) -> None:
    """A cluster made by a create answered 502 exists all the same: the log names it, so
    that a ledger of what was made counts it (a count of 201 answers cannot)."""
    sim.faults.create_then_fail(1, 502)
    answer = http.post(f"{sim.base_url}/v2/clusters", json=cluster_body())
    assert answer.status_code == 502
    [made] = sim.clusters
    [logged] = [r for r in sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    assert logged.created == made
