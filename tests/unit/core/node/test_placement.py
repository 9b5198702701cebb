"""The scheduler predicates a pod controls, against the virtual node we register."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.core.config import Settings
from reconciler.core.node.placement import closed_to, exclusion
from reconciler.core.node.virtual_node import build_node

NODE = build_node(Settings(), datetime(2026, 1, 1, tzinfo=UTC))


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [], **spec}}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"nodeSelector": {"type": "virtual-kubelet", "kubernetes.io/os": "linux"}},
        {"affinity": affinity({"matchExpressions": [expr("type", "In", "virtual-kubelet")]})},
        {"affinity": affinity({"matchExpressions": [expr("pool", "DoesNotExist")]})},
        {
            "affinity": affinity(
                {"matchExpressions": [expr("zone", "In", "x")]},
                {"matchFields": [expr("metadata.name", "In", "virtual-runpod")]},
            )
        },
        {"tolerations": [{"operator": "Exists"}]},
        {
            "tolerations": [
                {"key": "virtual-kubelet.io/provider", "value": "runpod", "effect": "NoSchedule"}
            ]
        },
        {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
    ],
    ids=[
        "nothing",
        "selector",
        "affinity-in",
        "affinity-absent-label",
        "affinity-or-fields",
        "tolerate-all",
        "tolerate-provider",
        "unrelated-toleration",
    ],
)
def test_allowed(spec: dict[str, Any]) -> None:
    assert exclusion(pod(**spec), NODE) is None


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"nodeSelector": {"pool": "a100"}}, "nodeSelector (pool)"),
        ({"nodeSelector": {"type": "real"}}, "nodeSelector (type)"),
        (
            {
                "affinity": affinity(
                    {"matchExpressions": [expr("type", "NotIn", "virtual-kubelet")]}
                )
            },
            "required node affinity",
        ),
        ({"affinity": affinity()}, "required node affinity"),
        (
            {"affinity": affinity({"matchExpressions": [expr("gpus", "Gt", "8")]})},
            "required node affinity",
        ),
        (
            {
                "tolerations": [
                    {"key": "virtual-kubelet.io/provider", "value": "aws", "effect": "NoSchedule"}
                ]
            },
            "taint virtual-kubelet.io/provider=runpod:NoSchedule",
        ),
        (
            {
                "tolerations": [
                    {
                        "key": "virtual-kubelet.io/provider",
                        "operator": "Exists",
                        "effect": "NoExecute",
                    }
                ]
            },
            "taint virtual-kubelet.io/provider",
        ),
    ],
    ids=[
        "selector-missing-label",
        "selector-other-value",
        "affinity-not-in",
        "no-terms",
        "gt-on-missing-label",
        "other-provider",
        "other-effect",
    ],
)
def test_excluded(spec: dict[str, Any], why: str) -> None:
    assert why in (exclusion(pod(**spec), NODE) or "")


def test_a_taint_the_node_gains_must_be_tolerated() -> None:
    tainted = {**NODE, "spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}}
    assert "maintenance:NoSchedule" in (exclusion(pod(), tainted) or "")
    assert (
        exclusion(pod(tolerations=[{"key": "maintenance", "operator": "Exists"}]), tainted) is None
    )


def with_taints(*taints: dict[str, str], unschedulable: bool = False) -> dict[str, Any]:
    spec = {**NODE["spec"], "taints": [*NODE["spec"]["taints"], *taints]}
    if unschedulable:
        spec["unschedulable"] = True
    return {**NODE, "spec": spec}


MAINTENANCE = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("node", "spec", "closed"),
    [
        (NODE, {}, False),
        (with_taints(unschedulable=True), {"tolerations": [{"operator": "Exists"}]}, True),
        (with_taints(MAINTENANCE), {}, True),
        (with_taints({**MAINTENANCE, "effect": "NoExecute"}), {}, True),
        (with_taints({**MAINTENANCE, "effect": "PreferNoSchedule"}), {}, False),
        (
            with_taints(MAINTENANCE),
            {"tolerations": [{"key": "maintenance", "operator": "Exists"}]},
            False,
        ),
        # The control plane's taints for a late heartbeat: the reconciler reading them is back.
        (with_taints({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}), {}, False),
        # Our own provider taint is the placement rules' business, not a closed node.
        (
            NODE,
            {
                "tolerations": [
                    {
                        "key": "virtual-kubelet.io/provider",
                        "value": "aws",
                        "operator": "Equal",
                        "effect": "NoSchedule",
                    }
                ]
            },
            False,
        ),
    ],
    ids=[
        "open",
        "cordoned",
        "foreign-no-schedule",
        "foreign-no-execute",
        "prefer-only",
        "tolerated",
        "heartbeat-taint",
        "provider-taint",
    ],
)
def test_a_cordoned_or_foreign_tainted_node_is_closed(
    node: dict[str, Any], spec: dict[str, Any], closed: bool
) -> None:
    assert (closed_to(pod(**spec), node) is not None) is closed
