"""The cloud resources the tick runs, each a plug-in (`base.Resource`): the engine and the
executor loop over this list and know none of them by name.

The order is the tick's: gangs observe first (a forming gang needs the GPU catalog,
which the instances' reads fetch once for both); after the pods' actions, a create
refused for want of stock marks the catalogs stale before the provisioner reads them,
credentials are collected, then the network-volume provisioner runs.

A new resource is one pure module in `core/resources/`, one module here (its steps and
its phases), its actions in `core/actions.py` and its crash points; then one line below.
"""

from __future__ import annotations

from reconciler.runtime.tick.resources.base import Resource, Shared

__all__ = ["Resource", "Shared", "registered"]
from reconciler.runtime.tick.resources.clusters import Clusters
from reconciler.runtime.tick.resources.instances import Instances
from reconciler.runtime.tick.resources.registries import Registries
from reconciler.runtime.tick.resources.volumes import Volumes


def registered(shared: Shared) -> list[Resource]:
    return [Clusters(shared), Instances(shared), Registries(shared), Volumes(shared)]
