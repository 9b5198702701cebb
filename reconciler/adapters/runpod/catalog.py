"""The catalog: GPU types and CPU flavors with their prices and stock."""

from __future__ import annotations

from reconciler.adapters.runpod.parse import parse_cpu_flavors, parse_gpu_types
from reconciler.adapters.runpod.transport import Call, RunPodTransport
from reconciler.core.domain import Cloud, CpuFlavor, GpuType


class CatalogApi:
    """`/v2/catalog`."""

    def __init__(self, transport: RunPodTransport) -> None:
        self._transport = transport

    def gpu_types(
        self, gpu_count: int = 1, cloud: Cloud | None = None, product: str = "POD"
    ) -> list[GpuType]:
        """The GPU types with their stock for `product` (`POD`, or `CLUSTER`: Instant
        Clusters' own stock; the contract has no default, as it differs by product)."""
        params = {"include": "AVAILABILITY", "product": product, "count": str(gpu_count)}
        if cloud is not None:
            params["cloud"] = cloud.value
        call = Call("GET", "/v2/catalog/gpus", "GET /v2/catalog/gpus", params=params)
        return parse_gpu_types(self._transport.json(call))

    def cpu_flavors(self) -> list[CpuFlavor]:
        params = {"include": "AVAILABILITY", "product": "POD"}
        call = Call("GET", "/v2/catalog/cpus", "GET /v2/catalog/cpus", params=params)
        return parse_cpu_flavors(self._transport.json(call))
