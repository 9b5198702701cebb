"""What network volumes and Instant Clusters cost, through both simulators over real HTTP:
`reconciler cost` shows RunPod's storage charges by namespace and claim and its cluster
charges by namespace and Job, to the cent of RunPod's own billing, still after the claim,
the Job and the resource are gone; a volume that is not ours is not counted; each billing
route is read at most once an hour, and never while nothing of its kind is ours."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import kubernetes
import requests
from click.testing import CliRunner

from reconciler.cli.commands import main
from reconciler.core.money.attribution import Billed
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.sim.kube.resources import PERSISTENT_VOLUME_CLAIMS

from .test_claims import add_class
from .test_clusters import members, running_gang

VOLUME_BILLING = "/v2/billing/network-volumes"
CLUSTER_BILLING = "/v2/billing/clusters"


def _claim(box: Sandbox, namespace: str, name: str, size: str) -> Any:
    box.ensure_namespace(namespace)
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": size}},
            "storageClassName": "runpod",
        },
    }
    return box.kube_sim.put("persistentvolumeclaims", body)


def _cost(box: Sandbox, *args: str) -> Any:
    result = CliRunner().invoke(
        main, ["--database-url", box.database_url, "cost", "-o", "json", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _ledger(box: Sandbox, route: str, id_field: str) -> dict[str, float]:
    """RunPod's own charges per resource, over everything it ever billed."""
    with requests.Session() as api:
        api.headers["Authorization"] = f"Bearer {API_KEY}"
        answer = api.get(
            f"{box.runpod_sim.base_url}{route}",
            params={"bucketSize": "hour", "startTime": "2000-01-01T00:00:00Z"},
        )
    totals: dict[str, float] = {}
    for record in answer.json()["records"]:
        totals[record[id_field]] = totals.get(record[id_field], 0.0) + record["totalAmount"]
    return totals


def _billing_reads(box: Sandbox, route: str, since: int = 0) -> list[dict[str, str]]:
    return [r.query for r in box.runpod_sim.requests[since:] if r.path == route]


def _to_next_hour(box: Sandbox) -> None:
    now = box.runpod_sim.clock.now()
    box.advance(3600 - (now.minute * 60 + now.second) + 1)


def test_storage_is_charged_to_each_claim_and_stays_after_the_claim_is_gone(
    box: Sandbox,
) -> None:
    add_class(box)
    ckpt = _claim(box, "ml", "ckpt", "100G")
    data = _claim(box, "web", "data", "20G")
    box.tick()
    volumes = {v["name"]: v["id"] for v in box.runpod_sim.volumes.values()}
    assert len(volumes) == 2
    with requests.Session() as api:  # someone else's volume on the account
        api.headers["Authorization"] = f"Bearer {API_KEY}"
        made = api.post(
            f"{box.runpod_sim.base_url}/v2/network-volumes",
            json={"name": "theirs", "size": 500, "dataCenter": "EU-RO-1"},
        )
        assert made.status_code == 201
    _to_next_hour(box)
    box.advance(2 * 3600)
    box.tick()
    box.kube_sim.store.delete(PERSISTENT_VOLUME_CLAIMS, "ml", "ckpt")
    box.tick()  # the released volume is deleted (reclaim Delete), then its PV
    box.tick()
    assert ckpt["metadata"]["uid"] not in " ".join(
        box.runpod_sim.volumes[v]["name"] for v in box.runpod_sim.volumes
    )
    box.advance(2 * 3600)
    box.tick()
    ledger = _ledger(box, VOLUME_BILLING, "networkVolumeId")
    shown = _cost(box)
    rows = {(r["kind"], r["pod"]): r["usd"] for r in shown["rows"]}
    ids = {v: i for v, i in volumes.items()}
    ckpt_id = next(i for n, i in ids.items() if n.endswith(ckpt["metadata"]["uid"]))
    data_id = next(i for n, i in ids.items() if n.endswith(data["metadata"]["uid"]))
    assert rows[("network-volume", "ml/ckpt")] == round(ledger[ckpt_id], 2) > 0
    # The live volume's charge as far as billing was read (whole hours that ended).
    assert 0 < rows[("network-volume", "web/data")] <= round(ledger[data_id], 2)
    assert set(rows) == {("network-volume", "ml/ckpt"), ("network-volume", "web/data")}
    namespaces = {r["namespace"]: r["usd"] for r in _cost(box, "--by", "namespace")["rows"]}
    assert namespaces == {
        "ml": rows[("network-volume", "ml/ckpt")],
        "web": rows[("network-volume", "web/data")],
    }


def test_a_clusters_charges_go_to_its_job_and_stay_after_the_job_is_gone(box: Sandbox) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    _to_next_hour(box)
    box.advance(3600)
    box.tick()
    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    box.tick()
    assert box.runpod_sim.clusters == {}
    box.tick()
    box.advance(2 * 3600)
    box.tick()
    ledger = _ledger(box, CLUSTER_BILLING, "clusterId")
    shown = _cost(box)
    rows = {(r["kind"], r["pod"]): r["usd"] for r in shown["rows"]}
    assert rows == {("cluster", "default/train"): round(ledger[cluster_id], 2)}
    assert rows[("cluster", "default/train")] > 0
    assert shown["total_usd"] == round(ledger[cluster_id], 2)


def test_each_billing_route_is_read_at_most_hourly_and_only_for_what_is_ours(
    box: Sandbox,
) -> None:
    add_class(box)
    box.add_pod("web")
    box.tick()
    _to_next_hour(box)
    box.tick()
    box.tick()
    # Nothing of either kind is ours: neither route is read for what is ours; only the
    # ghost-charge audit asks, for one whole hour, once a clock hour.
    _only_the_audit(_billing_reads(box, VOLUME_BILLING))
    _only_the_audit(_billing_reads(box, CLUSTER_BILLING))
    _claim(box, "ml", "ckpt", "10G")
    box.tick()  # the volume and its PV are made
    box.tick()  # whose the volume is, is read from its PV
    _to_next_hour(box)
    seen = len(box.runpod_sim.requests)
    box.tick()
    [query] = _billing_reads(box, VOLUME_BILLING, seen)
    assert query["bucketSize"] == "hour"
    end = datetime.fromisoformat(query["endTime"].replace("Z", "+00:00"))
    assert end == box.runpod_sim.clock.now().astimezone(UTC).replace(
        minute=0, second=0, microsecond=0
    )
    seen = len(box.runpod_sim.requests)
    box.advance(600)
    box.tick()
    box.tick()
    assert _billing_reads(box, VOLUME_BILLING, seen) == []  # the hour is read already
    _only_the_audit(_billing_reads(box, CLUSTER_BILLING))


def _only_the_audit(reads: list[dict[str, str]]) -> None:
    windows = [(q["startTime"], q["endTime"]) for q in reads]
    assert len(windows) == len(set(windows))
    for start, end in windows:
        hours = datetime.fromisoformat(end) - datetime.fromisoformat(start)
        assert hours.total_seconds() == 3600


def test_whose_a_cluster_is_is_written_once_not_by_every_process(box: Sandbox) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    box.tick()
    [(written, at)] = box.store.attributions.read(Billed.CLUSTER, [cluster_id]).values()
    assert (written.namespace, written.name) == ("default", "train")
    box.advance(60)
    box.restart()  # a new process (as each `sync --once` is) finds it written already
    box.tick()
    box.tick()
    assert box.store.attributions.read(Billed.CLUSTER, [cluster_id])[cluster_id][1] == at
    box.advance(86400)
    box.tick()  # once a day while it is seen, so that the cost history keeps it
    assert box.store.attributions.read(Billed.CLUSTER, [cluster_id])[cluster_id][1] > at
