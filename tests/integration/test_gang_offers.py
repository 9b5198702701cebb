"""A gang's GPU type and data center are ranked on Instant Cluster stock, through both
simulators: the catalog is read with `product=CLUSTER` while a gang forms (cached for
--catalog-ttl, none in a steady tick), so a type that pods can get but clusters cannot
is never POSTed for a gang; with no cluster stock anywhere the gang waits and says why,
sending no POST; a single pod still ranks on pods' stock."""

from __future__ import annotations

from typing import Any

from reconciler.demo.sandbox import Sandbox

A6000 = "NVIDIA RTX A6000"


def _cluster_posts(box: Sandbox) -> list[Any]:
    return [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]


def _catalog_products(box: Sandbox) -> list[str | None]:
    return [r.query.get("product") for r in box.runpod_sim.requests if r.path == "/v2/catalog/gpus"]


def _no_cluster_stock(box: Sandbox, gpu: str) -> None:
    for datacenter in box.runpod_sim.account.catalog.datacenters_of(gpu):
        box.runpod_sim.account.set_capacity(gpu, datacenter, 0, "CLUSTER")


def test_a_gang_is_ranked_on_cluster_stock_and_a_pod_on_pods(box: Sandbox) -> None:
    box.add_indexed_job("train", 2)
    box.tick()
    [first] = _cluster_posts(box)
    chosen = first.body["compute"]["gpuTypeId"]  # the best type on cluster stock
    _no_cluster_stock(box, chosen)  # pods can still get it; clusters no longer
    box.add_indexed_job("again", 2)
    box.add_pod("single", command=["python", "serve.py"])
    box.advance(box.settings.timing.catalog_ttl + 1)
    box.tick()
    posts = _cluster_posts(box)[1:]
    assert len(posts) == 1 and posts[0].status == 201  # no refused POST first
    assert posts[0].body["compute"]["gpuTypeId"] != chosen
    [pod_post] = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods")]
    assert pod_post.body["gpu"]["id"] == chosen
    assert "CLUSTER" in _catalog_products(box) and "POD" in _catalog_products(box)


def test_a_gang_without_cluster_stock_waits_saying_so(box: Sandbox) -> None:
    for gpu in list(box.runpod_sim.account.catalog.gpus):
        _no_cluster_stock(box, gpu)
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(30)
    box.tick()
    assert _cluster_posts(box) == []
    for pod in box.job_pods("train"):
        waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
        assert waiting["reason"] == "RunPodCapacityUnavailable"
        assert "Instant Cluster stock" in waiting["message"]


def test_a_running_gang_reads_no_catalog(box: Sandbox) -> None:
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(30)
    box.tick()
    reads = len(_catalog_products(box))
    box.advance(box.settings.timing.catalog_ttl + 1)
    box.tick()
    assert len(_catalog_products(box)) == reads
