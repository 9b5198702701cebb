"""The simulated RunPod's billing routes, answered from each resource's ledger
(the rules in `billing`, the volumes' in `volumes`).

    GET    /v2/billing/pods              per pod per bucket (`podId`)
    GET    /v2/billing                   the account per bucket
    GET    /v2/billing/clusters          per cluster per bucket (`clusterId`)
    GET    /v2/billing/network-volumes   per volume per bucket (`networkVolumeId`)
"""

from __future__ import annotations

from reconciler.sim.runpod import billing
from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.http import Reply, Request, RouteTable

ROUTES = RouteTable()


class BillingRoutes:
    def __init__(self, account: Account) -> None:
        self._account = account

    @ROUTES("GET", "/v2/billing/clusters")
    def _cluster_billing(self, request: Request) -> Reply:
        billing.check_filters(request.params, "clusterId")
        window = billing.resolve_window(request.params, request.now)
        cluster_id = request.params.get("clusterId")
        return Reply(200, billing.cluster_billing(self._account.ledgers, window, cluster_id))

    @ROUTES("GET", "/v2/billing/pods")
    def _pod_billing(self, request: Request) -> Reply:
        billing.check_filters(request.params, "podId")
        window = billing.resolve_window(request.params, request.now)
        return Reply(
            200, billing.pod_billing(self._account.ledgers, window, request.params.get("podId"))
        )

    @ROUTES("GET", "/v2/billing")
    def _billing(self, request: Request) -> Reply:
        billing.check_filters(request.params, None)
        window = billing.resolve_window(request.params, request.now)
        return Reply(200, billing.account_billing(self._account.ledgers, window))

    @ROUTES("GET", "/v2/billing/network-volumes")
    def _volume_billing(self, request: Request) -> Reply:
        billing.check_filters(request.params, "networkVolumeId")
        window = billing.resolve_window(request.params, request.now)
        volume_id = request.params.get("networkVolumeId")
        return Reply(200, self._account.volumes.billing(window, volume_id, request.now))
