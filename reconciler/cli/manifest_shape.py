"""Whether a manifest's Pod has the shape the API server would take, in the fields the
reconciler reads: `reconciler offers -f` reads a file nobody has validated, so a list
where a map belongs is said in one line (`metadata.annotations must be a map, not a
list`) before the planner's code ever sees it.

Only the types are checked, as the API server's schema checks them; what the values
mean is the planner's to judge, with its own sentences.
"""

from __future__ import annotations

from typing import Any

Shape = Any
"""A type (`str`, `dict`), a `Quantity`, a one-item list (each item has that shape), or
a dict of a map's known keys and their shapes (other keys are not checked)."""


class Quantity:
    """A resource quantity: a string or a number."""


class StringMap:
    """A map of strings to strings (labels, annotations, a node selector)."""


_CONTAINER: Shape = {
    "name": str,
    "image": str,
    "command": [str],
    "args": [str],
    "workingDir": str,
    "env": [{"name": str, "value": str, "valueFrom": dict}],
    "envFrom": [dict],
    "ports": [{"containerPort": int, "protocol": str, "name": str}],
    "resources": {"limits": {"*": Quantity}, "requests": {"*": Quantity}},
    "volumeMounts": [{"name": str, "mountPath": str}],
}

POD: Shape = {
    "metadata": {
        "name": str,
        "namespace": str,
        "annotations": StringMap,
        "labels": StringMap,
        "ownerReferences": [dict],
    },
    "spec": {
        "containers": [_CONTAINER],
        "initContainers": [_CONTAINER],
        "nodeSelector": StringMap,
        "tolerations": [dict],
        "volumes": [dict],
        "imagePullSecrets": [{"name": str}],
        "affinity": dict,
        "restartPolicy": str,
        "runtimeClassName": str,
    },
}

JOB: Shape = {
    "metadata": POD["metadata"],
    "spec": {
        "completions": int,
        "parallelism": int,
        "completionMode": str,
        "template": {"metadata": POD["metadata"], "spec": POD["spec"]},
    },
}


def shape_problem(value: Any, shape: Shape, where: str = "") -> str | None:
    """The first place where `value` has not the shape: "<path> must be a map, not a
    list"; None when it has. A null is an absent field, as the API server takes it."""
    if value is None:
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return _wrong(where, "a map", value)
        for key, item in value.items():
            inner = shape.get(key, shape.get("*"))
            if inner is not None:
                problem = shape_problem(item, inner, _join(where, str(key)))
                if problem is not None:
                    return problem
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return _wrong(where, "a list", value)
        for index, item in enumerate(value):
            problem = shape_problem(item, shape[0], f"{where}[{index}]")
            if problem is not None:
                return problem
        return None
    return _leaf_problem(value, shape, where)


def _leaf_problem(value: Any, shape: Shape, where: str) -> str | None:
    if shape is StringMap:
        if not isinstance(value, dict):
            return _wrong(where, "a map", value)
        for key, item in value.items():
            if not isinstance(item, str):
                return _wrong(_join(where, str(key)), "a string", item)
        return None
    if shape is Quantity:
        ok = isinstance(value, str | int | float) and not isinstance(value, bool)
        return None if ok else _wrong(where, "a quantity", value)
    if shape is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else _wrong(where, "a whole number", value)
    if not isinstance(value, shape):
        return _wrong(where, _NAMES[shape], value)
    return None


_NAMES = {str: "a string", dict: "a map", list: "a list"}


def _kind(value: Any) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "a list"
        case dict():
            return "a map"
    return type(value).__name__


def _wrong(where: str, wanted: str, value: Any) -> str:
    return f"{where} must be {wanted}, not {_kind(value)}"


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
