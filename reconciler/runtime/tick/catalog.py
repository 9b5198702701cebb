"""RunPod's catalogs (GPU types, CPU flavors), cached for --catalog-ttl."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.capacity.stock import StockMemory
from reconciler.core.config import Settings
from reconciler.core.domain import Cloud, CpuFlavor, GpuType, KubeObject
from reconciler.core.plan.observation import CreateInputs
from reconciler.core.translate.cpus import runs_on_cpu
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.gpus import unknown_datacenters

log = logging.getLogger(__name__)

Offer = TypeVar("Offer", GpuType, CpuFlavor)


def gpu_catalog(runpod: RunPodClient) -> list[Any]:
    return runpod.catalog.gpu_types()


def cpu_catalog(runpod: RunPodClient) -> list[Any]:
    return runpod.catalog.cpu_flavors()


CLUSTER_CATALOG = "cluster"
"""The kept catalog of GPU types with Instant Cluster stock."""


def cluster_catalog(runpod: RunPodClient) -> list[Any]:
    """GPU types with Instant Cluster stock (`product=CLUSTER`): what a gang can get."""
    return runpod.catalog.gpu_types(product="CLUSTER")


class CatalogCache(Generic[Offer]):
    """A RunPod catalog (GPU types or CPU flavors), fetched at most once per TTL; a
    failed fetch keeps the old copy.

    A create refused for want of stock proves the cached availability stale: the next
    tick that needs the catalog fetches it again, though not more often than
    `STALE_REFETCH` (each fetch is a request out of the quota). What a fetch shows in
    stock clears the stock memory's older refusals there.
    """

    STALE_REFETCH = timedelta(seconds=30)

    def __init__(
        self,
        ttl: float,
        stock: StockMemory,
        datacenter_ids: tuple[str, ...] = (),
        fetch: Callable[[RunPodClient], list[Offer]] = gpu_catalog,
        what: str = "GPU catalog",
        keep: Callable[[list[Offer], datetime], None] | None = None,
    ) -> None:
        """`keep` is told each fetched catalog (the store keeps it for `reconciler offers`)."""
        self.ttl = timedelta(seconds=ttl)
        self.stock = stock
        self.datacenter_ids = datacenter_ids
        self.fetch: Callable[[RunPodClient], list[Offer]] = fetch
        self.what = what
        self.keep: Callable[[list[Offer], datetime], None] | None = keep
        self._unknown_datacenters: tuple[str, ...] = ()
        self._types: list[Offer] = []
        self._fetched_at: datetime | None = None
        self._stale = False

    def mark_stale(self) -> None:
        self._stale = True

    def get(self, runpod: RunPodClient, now: datetime) -> list[Offer]:
        if self._due(now):
            try:
                self._types = self.fetch(runpod)
                self._fetched_at, self._stale = now, False
                # The catalog is fetched without `cloud`: RunPod then reports SECURE.
                self.stock.catalog_seen(self._types, now, Cloud.SECURE)
                self._check_datacenters()
                if self.keep is not None:
                    self.keep(self._types, now)
            except runpod_errors.RunPodError as exc:
                log.warning("could not refresh the %s: %s", self.what, exc)
        return self._types

    def _check_datacenters(self) -> None:
        """Say once (again when it changes) which of --datacenter-ids RunPod offers nothing
        in: pods limited to those wait for a stock that never comes."""
        unknown = unknown_datacenters(self.datacenter_ids, self._types)
        if unknown and unknown != self._unknown_datacenters:
            log.warning(
                "--datacenter-ids names %s, where RunPod's %s offers nothing "
                "(a typo, or a closed data center): nothing of it is created there",
                ", ".join(unknown),
                self.what,
            )
        self._unknown_datacenters = unknown

    def _due(self, now: datetime) -> bool:
        if self._fetched_at is None:
            return True
        age = now - self._fetched_at
        return age >= self.ttl or (self._stale and age >= self.STALE_REFETCH)


def on_cpu(pod: KubeObject, inputs: CreateInputs | None, settings: Settings) -> bool:
    """Whether the pod gets a CPU instance (so which catalog its offers come from);
    False when that cannot be told (the GPU catalog is then read and the translation
    gives the pod its reason)."""
    try:
        return runs_on_cpu(pod, inputs.job if inputs else None, settings)
    except TranslationError:
        return False
