"""Billing: what RunPod charged, hour by hour, per instance, volume and cluster."""

from __future__ import annotations

from datetime import datetime

from reconciler.adapters.runpod.parse import parse_pod_billing, parse_resource_billing
from reconciler.adapters.runpod.transport import Call, RunPodTransport, rfc3339
from reconciler.core.domain import BillingRecord, ResourceCharge


class BillingApi:
    """`/v2/billing`."""

    def __init__(self, transport: RunPodTransport) -> None:
        self._transport = transport

    def instances(self, start: datetime, end: datetime) -> list[BillingRecord]:
        """Hourly charges per pod in [start, end); RunPod snaps both to whole hours."""
        params = {"bucketSize": "hour", "startTime": rfc3339(start), "endTime": rfc3339(end)}
        call = Call("GET", "/v2/billing/pods", "GET /v2/billing/pods", params=params)
        return parse_pod_billing(self._transport.json(call))

    def network_volumes(self, start: datetime, end: datetime) -> list[ResourceCharge]:
        """Hourly storage charges per network volume in [start, end) (whole hours)."""
        return self._resources("/v2/billing/network-volumes", "networkVolumeId", start, end)

    def clusters(self, start: datetime, end: datetime) -> list[ResourceCharge]:
        """Hourly charges per Instant Cluster in [start, end) (whole hours)."""
        return self._resources("/v2/billing/clusters", "clusterId", start, end)

    def _resources(
        self, path: str, id_field: str, start: datetime, end: datetime
    ) -> list[ResourceCharge]:
        params = {"bucketSize": "hour", "startTime": rfc3339(start), "endTime": rfc3339(end)}
        route = f"GET {path}"
        return parse_resource_billing(
            self._transport.json(Call("GET", path, route, params=params)), route, id_field
        )
