"""Whether a pod's own placement rules allow the virtual node (offload mode).

The scheduler's predicates that a pod controls, evaluated against the Node object we
register: `spec.nodeSelector`, required node affinity, and tolerations of the node's
taints. One exception: the provider taint (`virtual-kubelet.io/provider`) exists to keep
the default scheduler away from the virtual node, and offloading is our explicit,
opted-in decision to go there, so a pod that says nothing about that key may be bound.
A pod that tolerates the key only for another value (another provider) may not.

Pure: a pod and a node in, a reason out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.core.domain import KubeObject
from reconciler.core.node.virtual_node import PROVIDER_TAINT

_EXECUTION_EFFECTS = ("NoSchedule", "NoExecute")
# Set by the node lifecycle controller when the node's heartbeat is late.
_HEARTBEAT_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")


def exclusion(pod: KubeObject, node: KubeObject) -> str | None:
    """Why the pod's placement rules keep it off `node`, or None if they allow it."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = spec.get("nodeSelector") or {}
    mismatched = sorted(k for k, v in selector.items() if labels.get(k) != v)
    if mismatched:
        return f"its nodeSelector ({', '.join(mismatched)}) does not match the virtual node"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required and not _any_term_matches(required.get("nodeSelectorTerms") or [], node):
        return "its required node affinity does not match the virtual node"
    return _untolerated_taint(pod, node)


def closed_to(pod: KubeObject, node: KubeObject) -> str | None:
    """Why the live node takes no new work for this pod (no binding, no new instance), or
    None: it is cordoned, or has a NoSchedule/NoExecute taint the pod does not tolerate.

    The taints the node lifecycle controller sets while our own heartbeat is late
    (`unreachable`, `not-ready`) do not count: they say the reconciler was away, and the
    reconciler running this very check is back (its heartbeat lifts them)."""
    if (node.get("spec") or {}).get("unschedulable"):
        return "the virtual node is cordoned (spec.unschedulable); `kubectl uncordon` it"
    # Our own provider taint is the placement rules' business (`exclusion`), which a
    # forced pod skips; the taints someone else added bind every pod.
    return _untolerated_taint(pod, node, ignored=(*_HEARTBEAT_TAINTS, PROVIDER_TAINT["key"]))


def _untolerated_taint(
    pod: KubeObject, node: KubeObject, ignored: tuple[str, ...] = _HEARTBEAT_TAINTS
) -> str | None:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if (
            taint.get("effect") in _EXECUTION_EFFECTS
            and taint.get("key") not in ignored
            and not _allowed(taint, tolerations)
        ):
            return f"it does not tolerate the virtual node's taint {_describe(taint)}"
    return None


def _allowed(taint: Mapping[str, Any], tolerations: list[Mapping[str, Any]]) -> bool:
    if any(_tolerates(t, taint) for t in tolerations):
        return True
    # Silence about the provider key is consent through runpod.io/managed (see above).
    is_provider = taint.get("key") == PROVIDER_TAINT["key"]
    return is_provider and not any(t.get("key") == taint.get("key") for t in tolerations)


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' ToleratesTaint: an empty key with Exists matches every taint."""
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def _describe(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def _any_term_matches(terms: Iterable[Mapping[str, Any]], node: KubeObject) -> bool:
    """Terms are ORed; within a term every expression must hold. No terms match nothing."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    fields = {"metadata.name": meta.get("name", "")}
    return any(
        (term.get("matchExpressions") or term.get("matchFields"))
        and all(_holds(e, labels) for e in term.get("matchExpressions") or [])
        and all(_holds(e, fields) for e in term.get("matchFields") or [])
        for term in terms
    )


def _holds(expression: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator", "")
    wanted = [str(v) for v in expression.get("values") or []]
    present = key in values
    actual = values.get(key, "")
    if operator == "In":
        return present and actual in wanted
    if operator == "NotIn":
        return not present or actual not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            number, bound = int(actual), int(wanted[0])
        except ValueError:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False
