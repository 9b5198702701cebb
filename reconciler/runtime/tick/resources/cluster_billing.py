"""How RunPod bills Instant Clusters (the clusters' `Resource.billing`): one
`GET /v2/billing/clusters` an hour while a cluster of ours is known, and a cluster
charged for an hour that began after RunPod answered its DELETE is a leak, deleted again
(`core.money.charges.cluster_leaks`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.actions import CreateCluster, DeleteCluster
from reconciler.core.config import Settings
from reconciler.core.domain import ResourceCharge
from reconciler.core.money import charges
from reconciler.core.money.attribution import Billed
from reconciler.core.plan.observation import Observation
from reconciler.runtime.tick.money import billing

log = logging.getLogger(__name__)


def cluster_billing(runpod: RunPodClient, store: Store, settings: Settings) -> billing.BillingRoute:
    def leaks(kept: Sequence[ResourceCharge]) -> list[DeleteCluster]:
        found = charges.cluster_leaks(
            kept, store.attributions.clusters_deleted(), settings.timing.orphan_grace_time
        )
        for leak in found:
            log.error(
                "LEAK: Instant Cluster %s: %s; deleting it again", leak.cluster_id, leak.detail
            )
        return found

    return billing.BillingRoute(
        Billed.CLUSTER.value,
        runpod.billing.clusters,
        leaks,
        creates=(CreateCluster,),
        audit=billing.Audit(_listed, runpod.clusters.members),
    )


def _listed(observation: Observation) -> set[str]:
    """The clusters the tick's one pod list shows (by their members): no request."""
    return {m.cluster_id for m in observation.members if m.cluster_id}
