"""The simulated GPU and CPU catalogs and their capacity: free GPUs per (GPU type, data
center), free vCPUs per (CPU flavor, data center).

A GPU type is given as the catalog answers it (`id`, `name`, `memory`, `secure`,
`community`, `price`, `maxCount`) plus a `capacity` map {data center id: free GPUs} and a
`cuda` map {data center id: the CUDA version its hosts' driver reports}: each type's hosts
in one data center run one driver, so a pod's host CUDA follows from where it is placed.
The catalog lists each type's versions (`cudaVersions`, with include=AVAILABILITY), a
create's `gpu.allowedCudaVersions` (exact) or `gpu.minCudaVersion` (numeric) narrows the
data centers it may take, and no host meeting them is a capacity error (400).
Both clouds draw on the same free count, a simplification: on RunPod secure and
community machines are separate fleets. A CPU flavor likewise (`id`, `name`, `group`,
`vcpu`, `ramGbPerVcpu`, `price`) with a `capacity` map {data center id: free vCPUs}.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

DATACENTERS = {
    "US-TX-3": "US Texas 3",
    "EU-RO-1": "Europe Romania 1",
    "US-KS-2": "US Kansas 2",
}


def _gpu(
    gpu_id: str,
    name: str,
    memory: int,
    prices: tuple[float, float | None],
    capacity: list[int],
    cuda: list[str],
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
        "cuda": dict(zip(DATACENTERS, cuda, strict=True)),
    }


# Prices in USD per GPU-hour, roughly RunPod's list prices; capacity in free GPUs; the
# hosts' CUDA versions per data center (older drivers linger on the older types).
DEFAULT_GPU_TYPES: list[dict[str, Any]] = [
    _gpu(
        "NVIDIA GeForce RTX 4090",
        "RTX 4090",
        24,
        (0.69, 0.34),
        [64, 32, 24],
        ["12.8", "12.4", "12.2"],
    ),
    _gpu("NVIDIA RTX A6000", "RTX A6000", 48, (0.49, 0.33), [16, 8, 0], ["12.2", "12.4", "12.8"]),
    _gpu("NVIDIA L40S", "L40S", 48, (0.86, 0.79), [8, 0, 4], ["12.8", "12.6", "12.4"]),
    _gpu(
        "NVIDIA A100 80GB PCIe",
        "A100 PCIe",
        80,
        (1.64, 1.19),
        [8, 2, 0],
        ["12.6", "12.4", "12.2"],
    ),
    _gpu("NVIDIA H100 80GB HBM3", "H100 SXM", 80, (2.99, None), [2, 0, 0], ["12.8"] * 3),
    _gpu("NVIDIA B200", "B200", 180, (5.99, None), [0, 0, 0], ["12.9"] * 3),
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
        # The CUDA version the hosts report, by (GPU type, data center); none for CPUs.
        self.cuda: dict[tuple[str, str], str] = {}
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
        for datacenter, version in entry.get("cuda", {}).items():
            self.cuda[(offer.id, datacenter)] = str(version)
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
        self,
        gpu_id: str,
        count: int,
        allowed: Iterable[str],
        cuda: Callable[[str | None], bool] = lambda _: True,
        product: str = "POD",
    ) -> str | None:
        """Reserve GPUs in the allowed data center with the most free whose hosts' CUDA
        version `cuda` accepts; None if none fits."""
        free_now = self.pool(product)
        allowed_set = set(allowed) or set(self.datacenters_of(gpu_id))
        fitting = [
            (free, dc)
            for (gpu, dc), free in free_now.items()
            if gpu == gpu_id and dc in allowed_set and free >= count and cuda(self.cuda_at(gpu, dc))
        ]
        if not fitting:
            return None
        _, chosen = max(fitting)
        free_now[(gpu_id, chosen)] -= count
        return chosen

    def cuda_at(self, gpu_id: str, datacenter: str) -> str | None:
        """The CUDA version of this type's hosts there (None: they report none)."""
        return self.cuda.get((gpu_id, datacenter))

    def give_back(self, gpu_id: str, datacenter: str, count: int, product: str = "POD") -> None:
        free_now = self.pool(product)
        key = (gpu_id, datacenter)
        free_now[key] = free_now.get(key, 0) + count

    def listing(
        self,
        count: int,
        cloud: str | None,
        cuda: Callable[[str | None], bool] | None = None,
        products: Iterable[str] = ("POD",),
    ) -> list[dict[str, Any]]:
        """The catalog with availability for pods of `count` GPUs in the best of the
        `products`' stocks; cloud None = no stock. Clusters are Secure Cloud only. `cuda`
        scopes the stock and the versions listed to hosts whose version it accepts."""
        return [
            self._entry(offer, count, cloud, cuda, tuple(products)) for offer in self.gpus.values()
        ]

    def _entry(
        self,
        offer: GpuOffer,
        count: int,
        cloud: str | None,
        cuda: Callable[[str | None], bool] | None,
        products: tuple[str, ...] = ("POD",),
    ) -> dict[str, Any]:
        entry = offer.to_json()
        if cloud is None:
            return entry
        usable = offer.offered(cloud) and count <= offer.max_for(cloud)
        scoped = cuda or (lambda _: True)
        stock = [
            {
                "id": dc,
                "name": DATACENTERS.get(dc, dc),
                "availability": max(
                    (
                        availability_level(
                            self._free(offer.id, dc, product)
                            if usable and scoped(self.cuda_at(offer.id, dc))
                            else 0,
                            count,
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
        versions = self._cuda_versions(offer.id, count if usable else None)
        versions = [v for v in versions if scoped(v["version"])]
        if versions:  # absent, not empty, for a type whose hosts report none
            entry["cudaVersions"] = versions
        return entry

    def _cuda_versions(self, gpu_id: str, count: int | None) -> list[dict[str, Any]]:
        """The type's hosts' CUDA versions, newest first, each available when a data
        center of that version has room for `count` GPUs (None: the type is not usable)."""
        available: dict[str, bool] = {}
        for dc in self.datacenters_of(gpu_id):
            version = self.cuda_at(gpu_id, dc)
            if version is not None:
                room = count is not None and self.free.get((gpu_id, dc), 0) >= count
                available[version] = available.get(version, False) or room
        return [
            {"version": version, "available": available[version]}
            for version in sorted(available, key=cuda_key, reverse=True)
        ]


def cuda_key(version: str) -> tuple[int, ...]:
    """A `major.minor` version compared as numbers: 12.10 is above 12.9."""
    return tuple(int(part) for part in version.split("."))


_LEVELS = ["NONE", "LOW", "MEDIUM", "HIGH"]
