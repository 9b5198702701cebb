"""The simulated RunPod's catalog routes (the offers in `catalog`).

GET    /v2/catalog/gpus   `include=AVAILABILITY&product=POD|CLUSTER`, `count`, `cloud`: the
                          stock of each product context asked for (clusters' is its own), and
                          `cudaVersions` or `minCudaVersion` scoping stock to such hosts
GET    /v2/catalog/cpus   `include=AVAILABILITY&product=POD`
"""

from __future__ import annotations

import re
from collections.abc import Callable

from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.catalog import cuda_key
from reconciler.sim.runpod.http import Reply, Request, RouteTable, int_param
from reconciler.sim.runpod.validate import Problem

ROUTES = RouteTable()
_EXACT = re.compile(r"\d+\.\d+")
_FLOOR = re.compile(r"\d+(\.\d+)?")


def _cuda_filter(params: dict[str, str], available: bool) -> Callable[[str | None], bool] | None:
    """The query's `cudaVersions` (exact `major.minor` list) or `minCudaVersion` (a floor,
    a bare major too): valid only with include=AVAILABILITY, never both, 422 if malformed."""
    exact, floor = params.get("cudaVersions"), params.get("minCudaVersion")
    if exact is None and floor is None:
        return None
    if not available:
        raise Problem(400, "cudaVersions and minCudaVersion require include=AVAILABILITY")
    if exact is not None and floor is not None:
        raise Problem(400, "cudaVersions and minCudaVersion are mutually exclusive")
    if exact is not None:
        wanted = exact.split(",")
        if not all(_EXACT.fullmatch(v) for v in wanted):
            raise Problem(422, "Request validation failed.", errors=["cudaVersions: major.minor"])
        return lambda version: version in wanted
    assert floor is not None
    if not _FLOOR.fullmatch(floor):
        raise Problem(422, "Request validation failed.", errors=["minCudaVersion: major[.minor]"])
    least = cuda_key(floor if "." in floor else f"{floor}.0")
    return lambda version: version is not None and cuda_key(version) >= least


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
        cuda = _cuda_filter(params, bool(include))
        count = int_param(params, "count", 1, 1, 64)
        cloud = params.get("cloud", "SECURE")
        products = set(params.get("product", "POD").split(","))
        if cloud not in ("SECURE", "COMMUNITY") or not products <= {"POD", "CLUSTER", "SERVERLESS"}:
            raise Problem(422, "Request validation failed.", errors=["cloud or product: bad value"])
        listing = self._account.catalog.listing(count, cloud if include else None, cuda, products)
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
