"""Admission plugins on by default in kube-apiserver that change what a client creates.

DefaultTolerationSeconds: a pod created without a toleration for the
`node.kubernetes.io/not-ready` or `node.kubernetes.io/unreachable` NoExecute taint gets
one for 300 s. So every ordinary pod is evicted five minutes after its node stopped
reporting (the node lifecycle controller in `kube_controllers` does the evicting).
"""

from __future__ import annotations

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
