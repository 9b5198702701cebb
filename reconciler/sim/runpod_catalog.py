"""The simulated GPU and CPU catalogs and their capacity: free GPUs per (GPU type, data
center), free vCPUs per (CPU flavor, data center).

A GPU type is given as the catalog answers it (`id`, `name`, `memory`, `secure`,
`community`, `price`, `maxCount`) plus a `capacity` map {data center id: free GPUs}.
Both clouds draw on the same free count, a simplification: on RunPod secure and
community machines are separate fleets. A CPU flavor likewise (`id`, `name`, `group`,
`vcpu`, `ramGbPerVcpu`, `price`) with a `capacity` map {data center id: free vCPUs}.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

DATACENTERS = {
    "US-TX-3": "US Texas 3",
    "EU-RO-1": "Europe Romania 1",
    "US-KS-2": "US Kansas 2",
}


def _gpu(
    gpu_id: str, name: str, memory: int, prices: tuple[float, float | None], capacity: list[int]
) -> dict[str, Any]:
    secure_price, community_price = prices
    return {
        "id": gpu_id,
        "name": name,
        "memory": memory,
        "secure": True,
        "community": community_price is not None,
        "price": {"secure": secure_price, "community": community_price or 0.0},
        "maxCount": {"secure": 8, "community": 0 if community_price is None else 4},
        "capacity": dict(zip(DATACENTERS, capacity, strict=True)),
    }


# Prices in USD per GPU-hour, roughly RunPod's list prices; capacity in free GPUs.
DEFAULT_GPU_TYPES: list[dict[str, Any]] = [
    _gpu("NVIDIA GeForce RTX 4090", "RTX 4090", 24, (0.69, 0.34), [64, 32, 24]),
    _gpu("NVIDIA RTX A6000", "RTX A6000", 48, (0.49, 0.33), [16, 8, 0]),
    _gpu("NVIDIA L40S", "L40S", 48, (0.86, 0.79), [8, 0, 4]),
    _gpu("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, (1.64, 1.19), [8, 2, 0]),
    _gpu("NVIDIA H100 80GB HBM3", "H100 SXM", 80, (2.99, None), [2, 0, 0]),
    _gpu("NVIDIA B200", "B200", 180, (5.99, None), [0, 0, 0]),
]


def _cpu(
    flavor_id: str, name: str, vcpus: tuple[int, int], ram: float, price: float, capacity: list[int]
) -> dict[str, Any]:
    return {
        "id": flavor_id,
        "name": name,
        "group": f"Gen {flavor_id[3]}",
        "vcpu": {"min": vcpus[0], "max": vcpus[1]},
        "ramGbPerVcpu": ram,
        "price": {"securePerVcpu": price, "serverlessPerVcpu": round(price * 1.5, 4)},
        "capacity": dict(zip(DATACENTERS, capacity, strict=True)),
    }


# Prices in USD per vCPU-hour, roughly RunPod's; capacity in free vCPUs.
DEFAULT_CPU_FLAVORS: list[dict[str, Any]] = [
    _cpu("cpu3c", "Compute-Optimized", (2, 32), 2, 0.03, [256, 128, 0]),
    _cpu("cpu3g", "General Purpose", (2, 64), 4, 0.04, [256, 0, 128]),
    _cpu("cpu3m", "Memory-Optimized", (2, 32), 8, 0.06, [128, 64, 0]),
    _cpu("cpu5c", "Compute-Optimized", (2, 32), 2, 0.05, [128, 0, 64]),
]


@dataclass(frozen=True)
class GpuOffer:
    id: str
    name: str
    memory: int
    secure: bool
    community: bool
    price: dict[str, float]
    max_count: dict[str, int]

    def offered(self, cloud: str) -> bool:
        return self.secure if cloud == "SECURE" else self.community

    def price_for(self, cloud: str) -> float:
        return float(self.price.get(cloud.lower(), 0.0))

    def max_for(self, cloud: str) -> int:
        return int(self.max_count.get(cloud.lower(), 0))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "pool": None,
            "manufacturer": "NVIDIA",
            "memory": self.memory,
            "secure": self.secure,
            "community": self.community,
            "price": dict(self.price),
            "maxCount": dict(self.max_count),
        }


def availability_level(free_gpus: int, count: int) -> str:
    """Stock level for pods of `count` GPUs, from how many such pods still fit."""
    fits = free_gpus // max(1, count)
    if fits == 0:
        return "NONE"
    if fits <= 2:
        return "LOW"
    return "MEDIUM" if fits <= 9 else "HIGH"


class Catalog:
    def __init__(
        self, gpu_types: Iterable[dict[str, Any]], cpu_flavors: Iterable[dict[str, Any]] = ()
    ) -> None:
        self.gpus: dict[str, GpuOffer] = {}
        self.cpus: dict[str, dict[str, Any]] = {}
        """CPU flavors as the catalog answers them, without `capacity`."""
        # Free GPUs, or free vCPUs, by (GPU type or CPU flavor id, data center).
        self.free: dict[tuple[str, str], int] = {}
        # Free GPUs for Instant Clusters, a stock of its own (`product=CLUSTER`): a type
        # that is plentiful for pods may be scarce for clusters, and the other way round.
        self.cluster_free: dict[tuple[str, str], int] = {}
        for entry in copy.deepcopy(list(gpu_types)):
            self._add(entry)
        for entry in copy.deepcopy(list(cpu_flavors)):
            for datacenter, count in entry.pop("capacity", {}).items():
                self.free[(entry["id"], datacenter)] = int(count)
            self.cpus[entry["id"]] = entry

    def cpu_listing(self, available: bool) -> list[dict[str, Any]]:
        """The CPU catalog; with `available`, stock for pods of 2 vCPUs (the smallest)."""
        listing = []
        for flavor in self.cpus.values():
            entry = copy.deepcopy(flavor)
            if available:
                stock = [
                    {
                        "id": dc,
                        "name": DATACENTERS.get(dc, dc),
                        "availability": availability_level(self.free[(flavor["id"], dc)], 2),
                    }
                    for dc in self.datacenters_of(flavor["id"])
                ]
                levels = [item["availability"] for item in stock]
                entry["availability"] = max(levels, key=_LEVELS.index, default="NONE")
                if entry["availability"] != "NONE":
                    entry["dataCenters"] = stock
            listing.append(entry)
        return listing

    def _add(self, entry: dict[str, Any]) -> None:
        offer = GpuOffer(
            id=entry["id"],
            name=entry.get("name", entry["id"]),
            memory=int(entry.get("memory", 0)),
            secure=bool(entry.get("secure", True)),
            community=bool(entry.get("community", False)),
            price=entry.get("price", {"secure": 0.0, "community": 0.0}),
            max_count=entry.get("maxCount", {"secure": 8, "community": 8}),
        )
        self.gpus[offer.id] = offer
        for datacenter, count in entry.get("capacity", {}).items():
            self.free[(offer.id, datacenter)] = int(count)
        clusters = entry.get("clusterCapacity", entry.get("capacity", {}))
        for datacenter, count in clusters.items():
            self.cluster_free[(offer.id, datacenter)] = int(count)

    def datacenters(self) -> set[str]:
        """Every data center the simulated RunPod has (any GPU type, free or not)."""
        return {dc for (_, dc) in self.free}

    def datacenters_of(self, gpu_id: str) -> list[str]:
        known = [*self.free, *(key for key in self.cluster_free if key not in self.free)]
        return [dc for (gpu, dc) in known if gpu == gpu_id]

    def _free(self, gpu_id: str, datacenter: str, product: str) -> int:
        return self.pool(product).get((gpu_id, datacenter), 0)

    def pool(self, product: str) -> dict[tuple[str, str], int]:
        """The free GPUs of a product context: `CLUSTER`, or pods' (`POD`)."""
        return self.cluster_free if product == "CLUSTER" else self.free

    def take(
        self, gpu_id: str, count: int, allowed: Iterable[str], product: str = "POD"
    ) -> str | None:
        """Reserve GPUs in the allowed data center with the most free; None if none fits."""
        free_now = self.pool(product)
        allowed_set = set(allowed) or set(self.datacenters_of(gpu_id))
        fitting = [
            (free, dc)
            for (gpu, dc), free in free_now.items()
            if gpu == gpu_id and dc in allowed_set and free >= count
        ]
        if not fitting:
            return None
        _, chosen = max(fitting)
        free_now[(gpu_id, chosen)] -= count
        return chosen

    def give_back(self, gpu_id: str, datacenter: str, count: int, product: str = "POD") -> None:
        free_now = self.pool(product)
        key = (gpu_id, datacenter)
        free_now[key] = free_now.get(key, 0) + count

    def listing(
        self, count: int, cloud: str | None, products: Iterable[str] = ("POD",)
    ) -> list[dict[str, Any]]:
        """The catalog with availability for pods of `count` GPUs in the best of the
        `products`' stocks; cloud None = no stock. Clusters are Secure Cloud only."""
        return [self._entry(offer, count, cloud, tuple(products)) for offer in self.gpus.values()]

    def _entry(
        self, offer: GpuOffer, count: int, cloud: str | None, products: tuple[str, ...]
    ) -> dict[str, Any]:
        entry = offer.to_json()
        if cloud is None:
            return entry
        usable = offer.offered(cloud) and count <= offer.max_for(cloud)
        stock = [
            {
                "id": dc,
                "name": DATACENTERS.get(dc, dc),
                "availability": max(
                    (
                        availability_level(
                            self._free(offer.id, dc, product) if usable else 0, count
                        )
                        for product in products
                        if product != "CLUSTER" or cloud == "SECURE"
                    ),
                    key=_LEVELS.index,
                    default="NONE",
                ),
            }
            for dc in self.datacenters_of(offer.id)
        ]
        levels = [item["availability"] for item in stock]
        entry["availability"] = max(levels, key=_LEVELS.index, default="NONE")
        if entry["availability"] != "NONE":
            entry["dataCenters"] = stock
        return entry


_LEVELS = ["NONE", "LOW", "MEDIUM", "HIGH"]
