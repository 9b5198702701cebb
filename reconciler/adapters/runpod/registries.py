"""Registry credentials (container registry auth) kept at RunPod."""

from __future__ import annotations

import logging

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.parse import once_per_id, parse_registry
from reconciler.adapters.runpod.transport import Call, RunPodTransport, segment
from reconciler.core.domain import RegistryAuth

logger = logging.getLogger(__name__)


class RegistriesApi:
    """`/v2/registries`."""

    def __init__(self, transport: RunPodTransport) -> None:
        self._transport = transport

    def list(self) -> list[RegistryAuth]:
        route = "GET /v2/registries"
        data = self._transport.json(Call("GET", "/v2/registries", route))
        entries = data.get("registries") if isinstance(data, dict) else None
        listed = entries if isinstance(entries, list) else []
        return [parse_registry(entry) for entry in once_per_id(listed, route)]

    def create(self, name: str, username: str, password: str) -> RegistryAuth:
        call = Call(
            "POST",
            "/v2/registries",
            "POST /v2/registries",
            idempotent=False,
            doubt="the credential may have been stored anyway",
            body={"name": name, "username": username, "password": password},
        )
        return self._transport.made(call, parse_registry)

    def delete(self, registry_id: str) -> bool:
        """Delete a credential; False when RunPod refuses because a pod still uses it."""
        path = f"/v2/registries/{segment(registry_id)}"
        try:
            self._transport.send(Call("DELETE", path, "DELETE /v2/registries/{id}")).close()
        except errors.RunPodNotFound:
            logger.debug("registry credential %s was already gone", registry_id)
        except errors.RejectedError:
            return False
        return True
