"""Jobs: the Job that owns a pod."""

from __future__ import annotations

from reconciler.adapters.kube.transport import KubeTransport, q
from reconciler.core.domain import KubeObject


class Jobs:
    """Reads of batch/v1 Jobs."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def get(self, namespace: str, name: str) -> KubeObject | None:
        return self._kube.get_optional(f"/apis/batch/v1/namespaces/{q(namespace)}/jobs/{q(name)}")

    def owning(self, pod: KubeObject) -> KubeObject | None:
        """The Job controlling this pod; None if none, or if the name now holds another Job."""
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
                job = self.get(meta.get("namespace") or "default", ref["name"])
                if job is not None and job["metadata"].get("uid") == ref.get("uid"):
                    return job
        return None
