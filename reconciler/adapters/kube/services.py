"""Services and EndpointSlices: the Services a pod on RunPod reaches and their
backends, and the EndpointSlices the reconciler publishes for its pods."""

from __future__ import annotations

import contextlib

from reconciler.adapters.kube.errors import KubeNotFound
from reconciler.adapters.kube.transport import KubeTransport, q
from reconciler.core.domain import KubeObject

SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
_SLICES = "/apis/discovery.k8s.io/v1"


class Services:
    """Reads of Services and EndpointSlices, writes of our own slices."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def in_namespace(self, namespace: str, page_size: int = 500) -> list[KubeObject]:
        return self._kube.list_all(f"/api/v1/namespaces/{q(namespace)}/services", "", page_size)

    def read(self, namespace: str, name: str) -> KubeObject | None:
        return self._kube.get_optional(f"/api/v1/namespaces/{q(namespace)}/services/{q(name)}")

    def slices(self, namespace: str, label_selector: str = "") -> list[KubeObject]:
        """The namespace's EndpointSlices (of every manager, as kube-proxy reads them)."""
        query = [("labelSelector", label_selector)] if label_selector else []
        page = self._kube.request(
            "GET", f"{_SLICES}/namespaces/{q(namespace)}/endpointslices", query=query
        )
        return list(page.get("items") or [])

    def managed_by(self, manager: str) -> list[KubeObject]:
        """Every namespace's EndpointSlices that `manager` manages."""
        page = self._kube.request(
            "GET", f"{_SLICES}/endpointslices", query=[("labelSelector", f"{MANAGED_BY}={manager}")]
        )
        return list(page.get("items") or [])

    def create_slice(self, namespace: str, body: KubeObject) -> KubeObject:
        return dict(
            self._kube.request(
                "POST", f"{_SLICES}/namespaces/{q(namespace)}/endpointslices", body=body
            )
        )

    def replace_slice(self, namespace: str, name: str, body: KubeObject) -> KubeObject:
        path = f"{_SLICES}/namespaces/{q(namespace)}/endpointslices/{q(name)}"
        return dict(self._kube.request("PUT", path, body=body))

    def delete_slice(self, namespace: str, name: str) -> None:
        path = f"{_SLICES}/namespaces/{q(namespace)}/endpointslices/{q(name)}"
        with contextlib.suppress(KubeNotFound):
            self._kube.request("DELETE", path)
