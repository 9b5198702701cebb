"""Storage: the network-volume provisioner's reads and writes of StorageClasses,
PersistentVolumeClaims and PersistentVolumes."""

from __future__ import annotations

from reconciler.adapters.kube.errors import KubeConflict, KubeNotFound
from reconciler.adapters.kube.transport import MERGE_PATCH, KubeTransport, q
from reconciler.core.domain import KubeObject


class Storage:
    """StorageClasses, PersistentVolumeClaims and PersistentVolumes."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def list_classes(self) -> list[KubeObject]:
        return self._kube.list_all("/apis/storage.k8s.io/v1/storageclasses", "", 500)

    def list_claims(self, namespace: str | None = None) -> list[KubeObject]:
        """Every namespace's claims, or one namespace's."""
        where = "" if namespace is None else f"/namespaces/{q(namespace)}"
        return self._kube.list_all(f"/api/v1{where}/persistentvolumeclaims", "", 500)

    def list_volumes(self) -> list[KubeObject]:
        return self._kube.list_all("/api/v1/persistentvolumes", "", 500)

    def read_claim(self, namespace: str, name: str) -> KubeObject | None:
        return self._kube.get_optional(_claim_path(namespace, name))

    def read_volume(self, name: str) -> KubeObject | None:
        return self._kube.get_optional(f"/api/v1/persistentvolumes/{q(name)}")

    def create_volume(self, volume: KubeObject) -> None:
        """Made already (a retry after a lost answer) is success."""
        try:
            self._kube.request("POST", "/api/v1/persistentvolumes", body=volume)
        except KubeConflict:
            return

    def delete_volume(self, name: str) -> None:
        try:
            self._kube.request("DELETE", f"/api/v1/persistentvolumes/{q(name)}")
        except KubeNotFound:
            return

    def patch_volume(self, name: str, patch: KubeObject) -> None:
        path = f"/api/v1/persistentvolumes/{q(name)}"
        self._kube.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def patch_claim(
        self, namespace: str, name: str, patch: KubeObject, status: bool = False
    ) -> None:
        path = _claim_path(namespace, name) + ("/status" if status else "")
        self._kube.request("PATCH", path, body=patch, content_type=MERGE_PATCH)


def _claim_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{q(namespace)}/persistentvolumeclaims/{q(name)}"
