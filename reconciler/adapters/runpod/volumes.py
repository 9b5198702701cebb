"""Network volumes: list, read by id, create, resize, delete."""

from __future__ import annotations

import logging
from typing import Any

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.parse import once_per_id, parse_network_volume
from reconciler.adapters.runpod.transport import Call, RunPodTransport, segment
from reconciler.core.domain import RunPodVolume

logger = logging.getLogger(__name__)


class NetworkVolumesApi:
    """`/v2/network-volumes`."""

    def __init__(self, transport: RunPodTransport) -> None:
        self._transport = transport

    def list(self) -> list[RunPodVolume]:
        route = "GET /v2/network-volumes"
        data = self._transport.json(Call("GET", "/v2/network-volumes", route))
        entries = data.get("networkVolumes") if isinstance(data, dict) else None
        listed = entries if isinstance(entries, list) else []
        return [parse_network_volume(entry) for entry in once_per_id(listed, route)]

    def get(self, volume_id: str) -> RunPodVolume:
        """`GET /v2/network-volumes/{id}`: read by id, so shown even while the list lags
        behind its create; RunPod's 404 (`RunPodNotFound`) is the one proof it is gone."""
        path = f"/v2/network-volumes/{segment(volume_id)}"
        return parse_network_volume(
            self._transport.json(Call("GET", path, "GET /v2/network-volumes/{id}"))
        )

    def create(
        self, name: str, size_gb: int, datacenter: str, kind: str | None = None
    ) -> RunPodVolume:
        body: dict[str, Any] = {"name": name, "size": size_gb, "dataCenter": datacenter}
        if kind is not None:
            body["type"] = kind
        call = Call(
            "POST",
            "/v2/network-volumes",
            "POST /v2/network-volumes",
            idempotent=False,
            doubt="the volume may have been created anyway",
            body=body,
        )
        return self._transport.made(call, parse_network_volume)

    def resize(self, volume_id: str, size_gb: int) -> RunPodVolume:
        path = f"/v2/network-volumes/{segment(volume_id)}"
        call = Call("PATCH", path, "PATCH /v2/network-volumes/{id}", body={"size": size_gb})
        return parse_network_volume(self._transport.json(call))

    def delete(self, volume_id: str) -> None:
        """Delete a volume; already gone is done. RunPod refuses (RejectedError) while an
        instance mounts it."""
        path = f"/v2/network-volumes/{segment(volume_id)}"
        try:
            self._transport.send(Call("DELETE", path, "DELETE /v2/network-volumes/{id}")).close()
        except errors.RunPodNotFound:
            logger.debug("network volume %s was already gone", volume_id)
