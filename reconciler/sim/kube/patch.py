"""The three patch formats of the Kubernetes API: JSON merge, strategic merge, JSON patch.

All functions return a new document and never modify their inputs: the store keeps
stored objects immutable so that list responses can be served without copying.
Strategic merge follows each list's patch strategy from the Go API types (merge key,
merged set, or atomic) and the directives kubectl and the kubelet send.
"""

from __future__ import annotations

import copy
from typing import Any

# The patch strategy of every list field, read from the Go API types' struct tags
# (`patchStrategy`, `patchMergeKey`) of the kinds the simulator serves. Paths are field
# names from the object's root with list indices skipped. A list that is not here is
# atomic: a strategic merge patch replaces it whole, as for `status.containerStatuses`,
# `spec.tolerations` and `spec.taints` (no patch strategy in the Go types).
_POD_SPEC_KEYS: dict[tuple[str, ...], str] = {
    ("containers",): "name",
    ("containers", "env"): "name",
    ("containers", "ports"): "containerPort",
    ("containers", "volumeMounts"): "mountPath",
    ("containers", "volumeDevices"): "devicePath",
    ("initContainers",): "name",
    ("initContainers", "env"): "name",
    ("initContainers", "ports"): "containerPort",
    ("initContainers", "volumeMounts"): "mountPath",
    ("initContainers", "volumeDevices"): "devicePath",
    ("ephemeralContainers",): "name",
    ("volumes",): "name",
    ("imagePullSecrets",): "name",
    ("hostAliases",): "ip",
    ("schedulingGates",): "name",
    ("topologySpreadConstraints",): "topologyKey",
    ("resourceClaims",): "name",
}
_METADATA_KEYS: dict[tuple[str, ...], str] = {("ownerReferences",): "uid"}
MERGE_KEYS: dict[tuple[str, ...], str] = {
    **{("spec", *path): key for path, key in _POD_SPEC_KEYS.items()},
    **{("spec", "template", "spec", *path): key for path, key in _POD_SPEC_KEYS.items()},
    **{("metadata", *path): key for path, key in _METADATA_KEYS.items()},
    **{("spec", "template", "metadata", *path): key for path, key in _METADATA_KEYS.items()},
    # Pod, Node and Job status.
    ("status", "conditions"): "type",
    ("status", "podIPs"): "ip",
    ("status", "hostIPs"): "ip",
    ("status", "resourceClaimStatuses"): "name",
    ("status", "addresses"): "type",
    # Service.
    ("spec", "ports"): "port",
}
# Lists of scalars merged as sets (patchStrategy "merge" without a key).
MERGED_SETS: frozenset[tuple[str, ...]] = frozenset(
    {
        ("metadata", "finalizers"),
        ("spec", "template", "metadata", "finalizers"),
        ("spec", "podCIDRs"),
    }
)
_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_ORDER_PREFIX = "$setElementOrder/"
_DELETE_PREFIX = "$deleteFromPrimitiveList/"


class PatchError(ValueError):
    """A patch that cannot be applied (answered with 422 Invalid)."""


class _Deleted:
    """What a map patched with `$patch: delete` becomes: its key goes from the parent."""


_DELETED = _Deleted()


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """apimachinery's strategicpatch for the built-in kinds, directives included.

    `$patch: replace|delete|merge` on maps and in lists, `$retainKeys`,
    `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`.
    """
    merged = _merge_map(target, patch, ())
    return {} if merged is _DELETED else merged


def _merge_map(target: Any, patch: Any, path: tuple[str, ...]) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get(_DIRECTIVE)
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != _DIRECTIVE}
    if directive == "delete":
        return _DELETED
    if directive not in (None, "merge"):
        raise PatchError(f"Unknown patch type: {directive} in map: {patch}")
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError(f"{_RETAIN_KEYS} must be a list at {'.'.join(path) or 'root'}")
        result = {k: v for k, v in result.items() if k in retain}
    orders: dict[str, Any] = {}
    for key, value in patch.items():
        if key.startswith(_DELETE_PREFIX):
            field = key.removeprefix(_DELETE_PREFIX)
            result[field] = [v for v in result.get(field) or [] if v not in (value or [])]
        elif key.startswith(_ORDER_PREFIX):
            orders[key.removeprefix(_ORDER_PREFIX)] = value
        elif key.startswith("$"):
            if key not in (_DIRECTIVE, _RETAIN_KEYS):
                raise PatchError(f"unknown strategic merge patch directive {key!r}")
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, (*path, key))
        else:
            merged = _merge_map(result.get(key), value, (*path, key))
            if merged is _DELETED:
                result.pop(key, None)
            else:
                result[key] = merged
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _ordered(result[field], order, MERGE_KEYS.get((*path, field)))
    return result


def _merge_list(target: Any, patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    current = list(target) if isinstance(target, list) else []
    if path in MERGED_SETS:
        return current + [v for v in patch if v not in current]
    key = MERGE_KEYS.get(path)
    if key is None:
        return copy.deepcopy(patch)  # atomic: replaced whole
    items, replace = _special_elements(current, patch, key, path)
    if replace:
        return [copy.deepcopy(item) for item in items]
    for item in items:
        index = next(
            (
                i
                for i, old in enumerate(current)
                if isinstance(old, dict) and old.get(key) == item[key]
            ),
            None,
        )
        if index is None:
            current.append(_strip(_merge_map({}, item, path)))
        else:
            current[index] = _strip(_merge_map(current[index], item, path))
    return current


def _special_elements(
    current: list[Any], patch: list[Any], key: str, path: tuple[str, ...]
) -> tuple[list[dict[str, Any]], bool]:
    """Apply `{"$patch": "delete", key: ...}` items now; `{"$patch": "replace"}` makes the
    rest of the patch the whole list. Returns the plain items and whether to replace."""
    plain: list[dict[str, Any]] = []
    replace = False
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"{'.'.join(path)}: a list with merge key {key!r} must hold maps")
        directive = item.get(_DIRECTIVE)
        if directive is None:
            if key not in item:
                raise PatchError(f"map: {item} does not contain declared merge key: {key}")
            plain.append(item)
        elif directive == "delete":
            if key not in item:
                raise PatchError(f"map: {item} does not contain declared merge key: {key}")
            current[:] = [
                old for old in current if not (isinstance(old, dict) and old.get(key) == item[key])
            ]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"Unknown patch type: {directive} in map: {item}")
    return plain, replace


def _strip(item: Any) -> Any:
    return {} if item is _DELETED else item


def _ordered(items: list[Any], order: Any, key: str | None) -> list[Any]:
    """`$setElementOrder`: the listed elements in the given order; elements only the
    server had keep their place after the element they followed."""
    if not isinstance(order, list):
        raise PatchError("$setElementOrder must be a list")
    wanted = [entry.get(key) if key and isinstance(entry, dict) else entry for entry in order]

    def identity(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    listed = sorted(
        (i for i in items if identity(i) in wanted), key=lambda i: wanted.index(identity(i))
    )
    result: list[Any] = []
    pending = list(listed)
    for item in items:
        if identity(item) in wanted:
            if pending:
                result.append(pending.pop(0))
        else:
            result.append(item)
    return result + pending


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 add/remove/replace/move/copy/test over RFC 6901 pointers."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    document = copy.deepcopy(target)
    for operation in operations:
        document = _apply_operation(document, operation)
    return document


def _apply_operation(document: Any, operation: Any) -> Any:
    if not isinstance(operation, dict) or "path" not in operation:
        raise PatchError(f"invalid JSON patch operation {operation!r}")
    op, path = operation.get("op"), _pointer(operation["path"])
    if op == "test":
        if _resolve(document, path) != operation.get("value"):
            raise PatchError(f"test operation failed at {operation['path']}")
        return document
    if op in ("move", "copy"):
        value = _resolve(document, _pointer(operation.get("from", "")))
        if op == "move":
            document = _remove(document, _pointer(operation["from"]))
        return _add(document, path, copy.deepcopy(value))
    if op == "remove":
        return _remove(document, path)
    if op == "replace":
        _resolve(document, path)
        return _add(_remove(document, path), path, copy.deepcopy(operation.get("value")))
    if op == "add":
        return _add(document, path, copy.deepcopy(operation.get("value")))
    raise PatchError(f"unknown JSON patch op {op!r}")


def _pointer(text: str) -> list[str]:
    if text == "":
        return []
    if not text.startswith("/"):
        raise PatchError(f"invalid JSON pointer {text!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _resolve(document: Any, parts: list[str]) -> Any:
    node = document
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchError(f"path /{'/'.join(parts)} does not exist")
    return node


def _add(document: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, last = _resolve(document, parts[:-1]), parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        index = len(parent) if last == "-" else _list_index(parent, last, allow_end=True)
        parent.insert(index, value)
    else:
        raise PatchError(f"cannot add at /{'/'.join(parts)}")
    return document


def _remove(document: Any, parts: list[str]) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent, last = _resolve(document, parts[:-1]), parts[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_list_index(parent, last, allow_end=False)]
    else:
        raise PatchError(f"path /{'/'.join(parts)} does not exist")
    return document


def _list_index(items: list[Any], part: str, *, allow_end: bool) -> int:
    limit = len(items) if allow_end else len(items) - 1
    if not part.isdigit() or int(part) > limit:
        raise PatchError(f"list index {part!r} out of range")
    return int(part)
