"""Pods: the node's pods, their status and annotations, binding and deleting them."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.kube.errors import KubeNotFound
from reconciler.adapters.kube.stream import WatchStream
from reconciler.adapters.kube.transport import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    KubeTransport,
    field_value,
    q,
)
from reconciler.core.domain import KubeObject
from reconciler.core.pods import podinfo


class Pods:
    """The pods of the virtual node and the pending ones it may take."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def list_on_node(self, node_name: str, page_size: int = 500) -> list[KubeObject]:
        """The pods bound to the node, as the reconciler keeps them (`podinfo.kept`)."""
        selector = node_pods_selector(node_name)
        return self._kube.list_all("/api/v1/pods", selector, page_size, podinfo.kept)

    def list_pending(self, page_size: int = 500) -> list[KubeObject]:
        """Unscheduled Pending pods in every namespace (offload candidates), as the
        reconciler keeps them (`podinfo.kept`)."""
        selector = "spec.nodeName=,status.phase=Pending"
        return self._kube.list_all("/api/v1/pods", selector, page_size, podinfo.kept)

    def resource_version(self, field_selector: str) -> str:
        """Where a watch of these pods can start: the resourceVersion of a one-item list
        (the whole list is the tick's business)."""
        page = self._kube.request(
            "GET", "/api/v1/pods", query=[("fieldSelector", field_selector), ("limit", "1")]
        )
        return str((page.get("metadata") or {}).get("resourceVersion") or "")

    def find(self, namespace: str, name: str) -> KubeObject | None:
        """One pod by name, through a list (the RBAC rules grant no single-pod `get`)."""
        page = self._kube.request(
            "GET",
            f"/api/v1/namespaces/{q(namespace)}/pods",
            query=[("fieldSelector", f"metadata.name={field_value(name)}")],
        )
        items = page.get("items") or []
        return items[0] if items else None

    def watch(
        self, field_selector: str, resource_version: str, timeout_seconds: int
    ) -> WatchStream:
        """The changes to these pods after `resource_version`, until the server ends the
        watch after `timeout_seconds` (or the caller closes the stream)."""
        query = [
            ("fieldSelector", field_selector),
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        return self._kube.watch("/api/v1/pods", query, timeout_seconds)

    def patch_status(
        self,
        namespace: str,
        name: str,
        status: dict[str, Any],
        annotations: dict[str, str | None] | None = None,
    ) -> None:
        """Make the pod show `status`, leaving what others set (their conditions) alone.

        A strategic merge patch, written for each list's patch strategy: conditions
        merge by type, so each of ours clears the reason and message it does not carry
        (a stale one would stay); podIPs and hostIPs merge by ip, so they are replaced
        whole (a merged old and new address is refused: hostIPs[0] must be hostIP, one
        address per family); containerStatuses is atomic and always sent whole.
        Annotations go in the same request when given: the pods/status subresource
        keeps metadata changes (it resets only spec, deletionTimestamp and
        ownerReferences).
        """
        body: dict[str, Any] = {"status": _status_patch(status)}
        if annotations:
            body["metadata"] = {"annotations": annotations}
        self._kube.request(
            "PATCH",
            _pod_path(namespace, name, "status"),
            body=body,
            content_type=STRATEGIC_MERGE_PATCH,
        )

    def patch_annotations(
        self,
        namespace: str,
        name: str,
        annotations: dict[str, str | None],
    ) -> None:
        """Merge patch: other annotations stay; a None value removes that key."""
        self._kube.request(
            "PATCH",
            _pod_path(namespace, name),
            body={"metadata": {"annotations": annotations}},
            content_type=MERGE_PATCH,
        )

    def delete(self, namespace: str, name: str, uid: str) -> None:
        """Finish a pod like the kubelet: grace 0, and only the pod with this UID.

        Already gone is success; a different pod under the same name raises KubeConflict.
        """
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": uid},
        }
        try:
            self._kube.request("DELETE", _pod_path(namespace, name), body=options)
        except KubeNotFound:
            return

    def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        self._kube.request("POST", _pod_path(namespace, name, "binding"), body=binding)


def node_pods_selector(node_name: str) -> str:
    """The field selector of the pods bound to a node."""
    return f"spec.nodeName={field_value(node_name)}"


def _pod_path(namespace: str, name: str, subresource: str = "") -> str:
    path = f"/api/v1/namespaces/{q(namespace)}/pods/{q(name)}"
    return f"{path}/{subresource}" if subresource else path


def _status_patch(status: dict[str, Any]) -> dict[str, Any]:
    patch = dict(status)
    if "conditions" in status:
        patch["conditions"] = [
            {"reason": None, "message": None, **condition} for condition in status["conditions"]
        ]
    for field in ("podIPs", "hostIPs"):
        if field in status:
            patch[field] = [{"$patch": "replace"}, *status[field]]
    return patch
