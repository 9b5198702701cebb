"""The cloud resources the tick runs, each a plug-in (`base.Resource`): the engine and the
executor loop over this list and know none of them by name. Order matters after the
pods' actions: credentials are collected first, then the network-volume provisioner.
Instances are still the executor's own.

A new resource is one pure module in `core/resources/`, one module here (its steps and
its phase), its actions in `core/actions.py` and its crash points; then one line below.
"""

from __future__ import annotations

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.config import Settings
from reconciler.core.domain import CpuFlavor, GpuType
from reconciler.runtime.catalog import CatalogCache
from reconciler.runtime.money import chores as money
from reconciler.runtime.resources.base import Resource
from reconciler.runtime.resources.clusters import Clusters
from reconciler.runtime.resources.registries import Registries
from reconciler.runtime.resources.volumes import Volumes


def registered(
    settings: Settings,
    runpod: RunPodClient,
    kube: KubeClient,
    store: Store,
    catalog: CatalogCache[GpuType],
    cpu_catalog: CatalogCache[CpuFlavor],
    attributions: money.Attributions,
) -> list[Resource]:
    return [
        Clusters(),
        Registries(runpod, settings.owner_id),
        Volumes(settings, runpod, kube, store, catalog, cpu_catalog, attributions),
    ]
