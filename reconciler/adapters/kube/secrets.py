"""Secrets: read as text (env vars) or bytes (keys), and our own made."""

from __future__ import annotations

import base64

from reconciler.adapters.kube.transport import KubeTransport, b64_text, q


class Secrets:
    """Reads and creates of Secrets."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def read(self, namespace: str, name: str) -> dict[str, str] | None:
        secret = self._kube.get_optional(f"/api/v1/namespaces/{q(namespace)}/secrets/{q(name)}")
        if secret is None:
            return None
        return {key: b64_text(value) for key, value in (secret.get("data") or {}).items()}

    def read_bytes(self, namespace: str, name: str) -> tuple[str, dict[str, bytes]] | None:
        """A Secret's type and its data as bytes; None if it does not exist."""
        secret = self._kube.get_optional(f"/api/v1/namespaces/{q(namespace)}/secrets/{q(name)}")
        if secret is None:
            return None
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        return str(secret.get("type") or "Opaque"), data

    def create(self, namespace: str, name: str, secret_type: str, data: dict[str, bytes]) -> None:
        """Create a Secret of ours; KubeConflict if the name is taken."""
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "runpod-reconciler"},
            },
            "type": secret_type,
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        }
        self._kube.request("POST", f"/api/v1/namespaces/{q(namespace)}/secrets", body=body)
