"""Instant Clusters: create one, read its members by id, delete it."""

from __future__ import annotations

import logging

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.body import create_cluster_body
from reconciler.adapters.runpod.parse import once_per_id, parse_instance
from reconciler.adapters.runpod.transport import Call, RunPodTransport, segment
from reconciler.core.domain import ClusterRequest, Instance, is_runpod_id

logger = logging.getLogger(__name__)


class ClustersApi:
    """`/v2/clusters`."""

    def __init__(self, transport: RunPodTransport) -> None:
        self._transport = transport

    def create(self, request: ClusterRequest) -> str:
        """`POST /v2/clusters`; the new cluster's id. Never retried: a lost answer may
        have made it, and its members are found by their tags."""
        call = Call(
            "POST",
            "/v2/clusters",
            "POST /v2/clusters",
            idempotent=False,
            doubt="the cluster may exist anyway: look for its members by their tags",
            body=create_cluster_body(request),
        )
        cluster_id = self._transport.made(call, _cluster_id)
        logger.info("created cluster %s for %s", cluster_id, request.name)
        return cluster_id

    def members(self, cluster_id: str) -> list[Instance]:
        """`GET /v2/clusters/{id}/pods`: the cluster's members, read by id, so shown even
        while the list lags behind their create; RunPod's 404 for the cluster
        (`RunPodNotFound`) is the one proof that it is gone."""
        path = f"/v2/clusters/{segment(cluster_id)}/pods"
        data = self._transport.json(Call("GET", path, "GET /v2/clusters/{id}/pods"))
        pods = data.get("pods") if isinstance(data, dict) else None
        if not isinstance(pods, list):
            raise errors.RunPodError(f"GET {path} answered without a pods list")
        return [parse_instance(pod) for pod in once_per_id(pods, "GET /v2/clusters/{id}/pods")]

    def delete(self, cluster_id: str) -> None:
        """Delete a cluster and all its members. One already gone counts as deleted."""
        path = f"/v2/clusters/{segment(cluster_id)}"
        try:
            self._transport.send(Call("DELETE", path, "DELETE /v2/clusters/{id}")).close()
        except errors.RunPodNotFound:
            logger.debug("cluster %s was already gone", cluster_id)


def _cluster_id(data: object) -> str:
    cluster_id = data.get("id") if isinstance(data, dict) else None
    if not is_runpod_id(cluster_id):
        raise errors.RunPodError("POST /v2/clusters answered without a cluster id of RunPod's form")
    return str(cluster_id)
