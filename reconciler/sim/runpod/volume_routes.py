"""The simulated RunPod's network-volume routes (the rules in `volumes`).

GET    /v2/network-volumes        every listed volume (after the listing lag)
POST   /v2/network-volumes        201; 422 off the schema, 400 unknown data center
GET    /v2/network-volumes/{id}   404 for an unknown id
PATCH  /v2/network-volumes/{id}   rename, grow
DELETE /v2/network-volumes/{id}   204; 400 while a pod mounts it
"""

from __future__ import annotations

from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.faults import Faults
from reconciler.sim.runpod.http import Reply, Request, RouteTable

ROUTES = RouteTable()


class VolumeRoutes:
    def __init__(self, account: Account, faults: Faults) -> None:
        self._account = account
        self._faults = faults

    @ROUTES("GET", "/v2/network-volumes")
    def _list_volumes(self, request: Request) -> Reply:
        volumes = [volume.to_json() for volume in self._account.volumes.listed(request.now)]
        return Reply(200, {"networkVolumes": volumes})

    @ROUTES("POST", "/v2/network-volumes")
    def _create_volume(self, request: Request) -> Reply:
        datacenters = self._account.catalog.datacenters()
        listed_from = self._account.listed_from(request.now)
        made = self._account.volumes.create(request.body, datacenters, request.now, listed_from)
        return Reply(201, made.to_json())

    @ROUTES("GET", "/v2/network-volumes/{id}")
    def _get_volume(self, request: Request) -> Reply:
        return Reply(200, self._account.volumes.get(request.id).to_json())

    @ROUTES("PATCH", "/v2/network-volumes/{id}")
    def _update_volume(self, request: Request) -> Reply:
        volume = self._account.volumes.update(request.id, request.body, request.now)
        return Reply(200, volume.to_json())

    @ROUTES("DELETE", "/v2/network-volumes/{id}")
    def _delete_volume(self, request: Request) -> Reply:
        users = self._mounting(request.id)
        keeps_billing = (
            request.id in self._account.volumes.live
            and not users
            and self._faults.volume_deletes.spend()
        )
        self._account.volumes.delete(request.id, users, request.now, keeps_billing)
        return Reply(204)

    def _mounting(self, volume_id: str) -> list[str]:
        """The pods (stopped ones too) that have the volume attached."""
        return [
            pod.id
            for pod in self._account.pods.values()
            if any(m["volumeId"] == volume_id for m in pod.mounts.get("network", []))
        ]
