"""Admission plugins on by default in kube-apiserver that change what a client creates.

ServiceAccount: a pod that does not opt out (`automountServiceAccountToken: false`) gets
its token as a projected volume named `kube-api-access-` plus five random characters,
mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount in every container.
The name differs from pod to pod, so two pods from one template never have equal specs.

DefaultTolerationSeconds: a pod created without a toleration for the
`node.kubernetes.io/not-ready` or `node.kubernetes.io/unreachable` NoExecute taint gets
one for 300 s. So every ordinary pod is evicted five minutes after its node stopped
reporting (the node lifecycle controller in `controllers` does the evicting).
"""

from __future__ import annotations

import random
from typing import Any

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300


def default_toleration_seconds(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if not any(_covers(t, key) for t in tolerations if isinstance(t, dict)):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    spec["tolerations"] = tolerations


def _covers(toleration: dict[str, Any], key: str) -> bool:
    """The plugin's own test: the key (or an empty key) with NoExecute (or any effect)."""
    return toleration.get("key", "") in ("", key) and toleration.get("effect", "") in (
        "",
        "NoExecute",
    )


TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# utilrand.String's alphabet: no vowels, no confusable characters.
_RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def service_account_token(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    spec["serviceAccount"] = spec.get("serviceAccountName") or "default"
    if spec.get("automountServiceAccountToken") is False:
        return
    containers = [
        c
        for c in (*(spec.get("initContainers") or []), *(spec.get("containers") or []))
        if isinstance(c, dict)
    ]
    if any(
        m.get("mountPath") == TOKEN_MOUNT_PATH
        for c in containers
        for m in c.get("volumeMounts") or []
    ):
        return
    name = "kube-api-access-" + "".join(random.choices(_RANDOM_ALPHABET, k=5))
    spec.setdefault("volumes", []).append({"name": name, "projected": _token_projection()})
    for container in containers:
        container.setdefault("volumeMounts", []).append(
            {"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}
        )


def _token_projection() -> dict[str, Any]:
    namespace_file = {
        "path": "namespace",
        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
    }
    return {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {"downwardAPI": {"items": [namespace_file]}},
        ],
    }
