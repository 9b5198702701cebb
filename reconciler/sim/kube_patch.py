"""The three patch formats of the Kubernetes API: JSON merge, strategic merge, JSON patch.

All functions return a new document and never modify their inputs: the store keeps
stored objects immutable so that list responses can be served without copying.
Strategic merge knows the merge keys of the lists this project and kubectl touch;
any other list is replaced, as the API server does for lists without a merge key.
"""

from __future__ import annotations

import copy
from typing import Any

# Lists merged element-wise by a key field, by their path of field names (indices skipped).
MERGE_KEYS: dict[tuple[str, ...], str] = {
    ("metadata", "ownerReferences"): "uid",
    ("status", "conditions"): "type",
    ("status", "containerStatuses"): "name",
    ("status", "initContainerStatuses"): "name",
    ("status", "ephemeralContainerStatuses"): "name",
    ("status", "addresses"): "type",
    ("status", "podIPs"): "ip",
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "containers", "env"): "name",
    ("spec", "containers", "ports"): "containerPort",
    ("spec", "volumes"): "name",
    ("spec", "template", "spec", "containers"): "name",
}
# Lists of scalars merged as sets (patchStrategy "merge" without a key).
MERGED_SETS: frozenset[tuple[str, ...]] = frozenset({("metadata", "finalizers")})


class PatchError(ValueError):
    """A patch that cannot be applied (answered with 422 Invalid)."""


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


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
        elif key.startswith("$"):
            continue  # ordering and retainKeys directives do not change content here
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, (*path, key))
        else:
            result[key] = strategic_merge_patch(result.get(key), value, (*path, key))
    return result


def _merge_list(target: Any, patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    current = target if isinstance(target, list) else []
    if path in MERGED_SETS:
        return current + [v for v in patch if v not in current]
    key = MERGE_KEYS.get(path)
    if key is None:
        return copy.deepcopy(patch)
    merged = list(current)
    for item in patch:
        _merge_keyed_item(merged, item, key, path)
    return merged


def _merge_keyed_item(merged: list[Any], item: Any, key: str, path: tuple[str, ...]) -> None:
    if not isinstance(item, dict) or key not in item:
        raise PatchError(f"map in list {'.'.join(path)} lacks merge key {key!r}")
    index = next((i for i, old in enumerate(merged) if old.get(key) == item[key]), None)
    if item.get("$patch") == "delete":
        if index is not None:
            del merged[index]
    elif index is None:
        merged.append(strategic_merge_patch({}, item, path))
    else:
        merged[index] = strategic_merge_patch(merged[index], item, path)


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
