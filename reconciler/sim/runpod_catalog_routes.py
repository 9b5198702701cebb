"""The simulated RunPod's catalog routes (the offers in `runpod_catalog`).

GET    /v2/catalog/gpus   `include=AVAILABILITY&product=POD|CLUSTER`, `count`, `cloud`: the
                          stock of each product context asked for (clusters' is its own)
GET    /v2/catalog/cpus   `include=AVAILABILITY&product=POD`
"""

from __future__ import annotations

from reconciler.sim.runpod_account import Account
from reconciler.sim.runpod_http import Reply, Request, RouteTable, int_param
from reconciler.sim.runpod_validate import Problem

ROUTES = RouteTable()


class CatalogRoutes:
    def __init__(self, account: Account) -> None:
        self._account = account

    @ROUTES("GET", "/v2/catalog/gpus")
    def _list_gpus(self, request: Request) -> Reply:
        params = request.params
        include = [item for item in params.get("include", "").split(",") if item]
        if any(item != "AVAILABILITY" for item in include):
            raise Problem(422, "Request validation failed.", errors=["include: AVAILABILITY"])
        stock_params = {"product", "count", "cloud"} & params.keys()
        if bool(include) != ("product" in params) or (stock_params and not include):
            raise Problem(400, "product, count and cloud require include=AVAILABILITY")
        count = int_param(params, "count", 1, 1, 64)
        cloud = params.get("cloud", "SECURE")
        products = set(params.get("product", "POD").split(","))
        if cloud not in ("SECURE", "COMMUNITY") or not products <= {"POD", "CLUSTER", "SERVERLESS"}:
            raise Problem(422, "Request validation failed.", errors=["cloud or product: bad value"])
        listing = self._account.catalog.listing(count, cloud if include else None, products)
        return Reply(200, {"gpus": listing})

    @ROUTES("GET", "/v2/catalog/cpus")
    def _list_cpus(self, request: Request) -> Reply:
        params = request.params
        include = [item for item in params.get("include", "").split(",") if item]
        if any(item != "AVAILABILITY" for item in include):
            raise Problem(422, "Request validation failed.", errors=["include: AVAILABILITY"])
        if bool(include) != ("product" in params) or ("vcpuCount" in params and not include):
            raise Problem(400, "product and vcpuCount require include=AVAILABILITY")
        if not set(params.get("product", "POD").split(",")) <= {"POD", "SERVERLESS"}:
            raise Problem(422, "Request validation failed.", errors=["product: bad value"])
        return Reply(200, {"cpus": self._account.catalog.cpu_listing(available=bool(include))})
