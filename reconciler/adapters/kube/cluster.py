"""The cluster around the node: its identity, version, namespaces and ConfigMaps."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.kube.transport import KubeTransport, b64_text, q

FALLBACK_NAMESPACE = "runpod-system"
# Where Kubernetes tells a pod its own namespace.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_namespace() -> str:
    """The pod's own namespace when running in a cluster, else runpod-system (where the
    leader and writer Leases, the kubelet's certificate and the SSH key Secret live)."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or FALLBACK_NAMESPACE
    except OSError:
        return FALLBACK_NAMESPACE


class Cluster:
    """Cluster-wide reads: kube-system's UID, the server version, a namespace's
    annotations, a ConfigMap."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        config_map = self._kube.get_optional(
            f"/api/v1/namespaces/{q(namespace)}/configmaps/{q(name)}"
        )
        if config_map is None:
            return None
        values = {k: b64_text(v) for k, v in (config_map.get("binaryData") or {}).items()}
        values.update(config_map.get("data") or {})
        return values

    def namespace_annotations(self, name: str) -> dict[str, str] | None:
        """The Namespace object's annotations (budget caps), None if it does not exist."""
        namespace = self._kube.get_optional(f"/api/v1/namespaces/{q(name)}")
        if namespace is None:
            return None
        return dict((namespace.get("metadata") or {}).get("annotations") or {})

    def uid(self) -> str:
        return str(self._kube.request("GET", "/api/v1/namespaces/kube-system")["metadata"]["uid"])

    def server_version(self) -> str:
        """The API server's gitVersion (GET /version), e.g. v1.32.3-eks-4096722."""
        return str(self._kube.request("GET", "/version").get("gitVersion") or "")
