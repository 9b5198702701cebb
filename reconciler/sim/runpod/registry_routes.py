"""The simulated RunPod's container registry credentials.

GET    /v2/registries, POST /v2/registries        the password is never echoed
GET    /v2/registries/{id}, DELETE /v2/registries/{id}   400 while a pod uses it
"""

from __future__ import annotations

from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.http import Reply, Request, RouteTable
from reconciler.sim.runpod.validate import Problem, check_create_registry

ROUTES = RouteTable()


class RegistryRoutes:
    def __init__(self, account: Account) -> None:
        self._account = account

    @ROUTES("GET", "/v2/registries")
    def _list_registries(self, request: Request) -> Reply:
        entries = [{"id": key, "name": name} for key, name in self._account.registries.items()]
        return Reply(200, {"registries": entries})

    @ROUTES("POST", "/v2/registries")
    def _create_registry(self, request: Request) -> Reply:
        check_create_registry(request.body)
        name = request.body["name"]
        if name in self._account.registries.values():
            raise Problem(400, f"a registry credential named {name!r} already exists")
        registry_id = self._account.new_id("reg_", 8)
        self._account.registries[registry_id] = name
        return Reply(201, {"id": registry_id, "name": name})

    @ROUTES("GET", "/v2/registries/{id}")
    def _get_registry(self, request: Request) -> Reply:
        name = self._account.registries.get(request.id)
        if name is None:
            raise Problem(404, "registry credential not found")
        return Reply(200, {"id": request.id, "name": name})

    @ROUTES("DELETE", "/v2/registries/{id}")
    def _delete_registry(self, request: Request) -> Reply:
        if request.id not in self._account.registries:
            raise Problem(404, "registry credential not found")
        users = sorted(p.id for p in self._account.pods.values() if p.registry == request.id)
        if users:
            raise Problem(400, f"registry credential is in use by pod {users[0]}")
        del self._account.registries[request.id]
        return Reply(204)
