"""Spend caps that count Instant Clusters and network volumes, through both simulators:
a running cluster counts its N members at N times their price against
`--max-hourly-spend` and `--max-instances`; a gang that would pass a cap waits with
`BudgetExceeded` and nothing is created; a namespace's `runpod.io/max-hourly-spend`
counts its claims' storage; and none of it costs a RunPod request."""

from __future__ import annotations

from typing import Any

from reconciler.core.reasons import PodReason
from reconciler.core.resources import storage_prices
from reconciler.demo.sandbox import Sandbox

from .test_claims import add_class
from .test_clusters import cluster_posts, members, running_gang
from .test_limits import status_reason
from .test_resource_cost import _claim


def _waiting(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["status"]["containerStatuses"][0]["state"].get("waiting") or {}


def _cap_namespace(box: Sandbox, namespace: str, **annotations: str) -> None:
    box.ensure_namespace(namespace)
    body = box.kube_sim.get("namespaces", None, namespace) or {}
    body["metadata"]["annotations"] = {f"runpod.io/{k}": v for k, v in annotations.items()}
    box.kube_sim.put("namespaces", body)


def test_a_running_cluster_counts_every_member_against_the_spend_cap(box: Sandbox) -> None:
    running_gang(box, size=3)
    listed = members(box)
    member_price = float(listed[0]["cost"])
    cluster_price = sum(float(m["cost"]) for m in listed)
    assert len(listed) == 3 and cluster_price > 2.5 * member_price
    # Room for half a member's price next to the whole cluster: no pod fits (each
    # costs at least what a member does), though it would next to one member's price.
    box.configure(max_hourly_spend=cluster_price + 0.5 * member_price)
    box.add_pod("one")
    box.tick()
    assert box.instance_for(box.pod("one") or {}) is None
    assert status_reason(box, "one") == PodReason.BUDGET_EXCEEDED
    # The members count with their container disks, priced as a pod's are.
    disks = sum(storage_prices.disks_hourly(int(m["disk"]), None) for m in listed)
    assert f"${cluster_price + disks:.2f}/h of" in _waiting(box.pod("one") or {})["message"]


def test_a_running_cluster_counts_every_member_against_the_instance_cap(box: Sandbox) -> None:
    running_gang(box, size=2)
    box.configure(max_instances=3)
    box.add_pod("one")
    box.add_pod("two")
    box.advance(1)
    box.tick()
    assert box.instance_for(box.pod("one") or {}) is not None
    assert box.instance_for(box.pod("two") or {}) is None
    assert status_reason(box, "two") == PodReason.BUDGET_EXCEEDED


def test_a_gang_over_its_namespaces_spend_cap_waits_and_nothing_is_created(
    box: Sandbox,
) -> None:
    box.add_pod("probe", namespace="other")
    box.tick()
    price = float((box.instance_for(box.pod("probe", "other") or {}) or {})["cost"])
    # One member's price fits the cap; the cluster of two (twice the price) does not.
    _cap_namespace(box, "ml", **{"max-hourly-spend": f"{1.5 * price:.4f}"})
    box.add_indexed_job("train", 2, namespace="ml")
    box.tick()
    box.tick()
    assert cluster_posts(box) == []
    pods = box.job_pods("train", "ml")
    assert len(pods) == 2
    for pod in pods:
        waiting = _waiting(pod)
        assert waiting["reason"] == "BudgetExceeded"
        assert "namespace ml" in waiting["message"] and "this cluster needs" in waiting["message"]


def test_a_gang_over_the_global_spend_cap_waits(box: Sandbox) -> None:
    box.add_pod("probe")
    box.tick()
    price = float((box.instance_for(box.pod("probe") or {}) or {})["cost"])
    box.configure(max_hourly_spend=2.5 * price)  # the probe and one member, not two
    box.add_indexed_job("train", 2)
    box.tick()
    assert cluster_posts(box) == []
    [message] = {_waiting(p)["message"] for p in box.job_pods("train")}
    assert "this cluster of 2 pods needs at least" in message


def test_a_namespaces_spend_cap_counts_its_claims_storage(box: Sandbox) -> None:
    add_class(box)
    box.add_pod("probe", namespace="other")
    box.tick()
    price = float((box.instance_for(box.pod("probe", "other") or {}) or {})["cost"])
    _claim(box, "ml", "data", "4000G")
    box.tick()  # the volume and its PV
    storage = storage_prices.hourly_usd(4000, "STANDARD")
    assert storage > 0.3
    # The pod alone fits the cap; with its namespace's storage it does not.
    _cap_namespace(box, "ml", **{"max-hourly-spend": f"{price + storage / 2:.4f}"})
    seen = len(box.runpod_sim.requests)
    box.add_pod("trainer", namespace="ml")
    box.tick()
    box.tick()
    assert box.instance_for(box.pod("trainer", "ml") or {}) is None
    waiting = _waiting(box.pod("trainer", "ml") or {})
    assert waiting["reason"] == "BudgetExceeded" and "namespace ml" in waiting["message"]
    # Counting the storage asked RunPod nothing: the PVs said it.
    paths = {r.path for r in box.runpod_sim.requests[seen:]}
    assert not any(p.startswith("/v2/network-volumes") or "billing" in p for p in paths)


def test_a_cluster_create_in_doubt_counts_against_the_spend_cap(box: Sandbox) -> None:
    box.add_pod("probe")
    box.tick()
    price = float((box.instance_for(box.pod("probe") or {}) or {})["cost"])
    box.configure(max_hourly_spend=3.5 * price)  # the probe and a cluster of 2: one more
    box.runpod_sim.account.set_listing_lag(20)  # the cluster is not listed yet
    box.runpod_sim.faults.create_then_fail(1, 500)  # made, but its answer is lost
    box.add_indexed_job("train", 2)
    box.tick()
    [post] = cluster_posts(box)
    assert post.status == 500 and len(box.runpod_sim.clusters) == 1
    box.add_pod("one")
    box.tick()
    # The cluster is in doubt, not listed: it still counts, so the pod waits.
    assert box.instance_for(box.pod("one") or {}) is None
    assert status_reason(box, "one") == PodReason.BUDGET_EXCEEDED
