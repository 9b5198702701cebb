"""Request checks of the simulated RunPod, split the way the real API splits them.

Contract violations (shape, types, unknown properties, a missing required field) are
422 with one `errors` entry per violation, the path written like `$.gpu.count`.
Rules across fields that the contract cannot express (exactly one of gpu/cpu, one
mount kind, port syntax) are 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any, str, list[str]], None]

ACTIONS = ("start", "stop", "restart", "terminate")
_CUDA = re.compile(r"^\d+\.\d+$")
_PORT = re.compile(r"^(\d{1,5})/(http|tcp)$")


class Problem(Exception):
    """An error answer: becomes an application/problem+json body."""

    TITLES = {
        400: "Bad Request",
        401: "Unauthorized",
        402: "Payment Required",
        403: "Forbidden",
        404: "Not Found",
        405: "Method Not Allowed",
        409: "Conflict",
        422: "Unprocessable Entity",
        429: "Too Many Requests",
    }

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        errors: list[str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        title = self.TITLES.get(
            self.status, "Internal Server Error" if self.status >= 500 else "Error"
        )
        body: dict[str, Any] = {"title": title, "status": self.status, "detail": self.detail}
        if self.errors:
            body["errors"] = self.errors
        return body


def _object(fields: dict[str, Check], required: tuple[str, ...] = ()) -> Check:
    def check(value: Any, where: str, problems: list[str]) -> None:
        if not isinstance(value, dict):
            problems.append(f"{where}: expected object")
            return
        problems.extend(
            f"{where}: additional properties '{name}' not allowed"
            for name in sorted(value.keys() - fields.keys())
        )
        problems.extend(
            f"{where}: missing property '{name}'" for name in required if name not in value
        )
        for name, field_check in fields.items():
            if name in value:
                field_check(value[name], f"{where}.{name}", problems)

    return check


def _string(min_length: int = 0, pattern: re.Pattern[str] | None = None) -> Check:
    def check(value: Any, where: str, problems: list[str]) -> None:
        if not isinstance(value, str):
            problems.append(f"{where}: expected string")
        elif len(value) < min_length:
            problems.append(f"{where}: length must be >= {min_length}")
        elif pattern is not None and not pattern.match(value):
            problems.append(f"{where}: does not match {pattern.pattern}")

    return check


def _integer(minimum: int | None = None, maximum: int | None = None) -> Check:
    def check(value: Any, where: str, problems: list[str]) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{where}: expected integer")
        elif minimum is not None and value < minimum:
            problems.append(f"{where}: must be >= {minimum}")
        elif maximum is not None and value > maximum:
            problems.append(f"{where}: must be <= {maximum}")

    return check


def _boolean(value: Any, where: str, problems: list[str]) -> None:
    if not isinstance(value, bool):
        problems.append(f"{where}: expected boolean")


def _enum(*allowed: str) -> Check:
    def check(value: Any, where: str, problems: list[str]) -> None:
        if value not in allowed:
            problems.append(f"{where}: must be one of {', '.join(allowed)}")

    return check


def _array(items: Check, max_items: int | None = None) -> Check:
    def check(value: Any, where: str, problems: list[str]) -> None:
        if not isinstance(value, list):
            problems.append(f"{where}: expected array")
            return
        if max_items is not None and len(value) > max_items:
            problems.append(f"{where}: at most {max_items} items")
        for index, item in enumerate(value):
            items(item, f"{where}[{index}]", problems)

    return check


def _string_map(value: Any, where: str, problems: list[str]) -> None:
    if not isinstance(value, dict):
        problems.append(f"{where}: expected object")
        return
    for key, item in value.items():
        if not isinstance(item, str):
            problems.append(f"{where}.{key}: expected string")


def _nullable(inner: Check) -> Check:
    def check(value: Any, where: str, problems: list[str]) -> None:
        if value is not None:
            inner(value, where, problems)

    return check


_GPU = _object(
    {
        "id": _string(),
        "count": _integer(1),
        "allowedCudaVersions": _array(_string(pattern=_CUDA)),
        "minCudaVersion": _string(pattern=_CUDA),
    },
    required=("id",),
)
_CPU = _object({"id": _string(1), "vcpuCount": _integer(2)}, required=("id", "vcpuCount"))
_MOUNTS = _object(
    {
        "persistent": _object({"size": _integer(10), "path": _string()}, ("size", "path")),
        "network": _array(
            _object({"volumeId": _string(), "path": _string()}, ("volumeId", "path")), 1
        ),
    }
)
_CREATE_POD = _object(
    {
        "name": _string(1),
        "image": _string(),
        "args": _string(),
        "disk": _integer(1),
        "env": _string_map,
        "ports": _array(_string()),
        "registry": _nullable(_string()),
        "cloud": _enum("SECURE", "COMMUNITY"),
        "cpu": _CPU,
        "gpu": _GPU,
        "dataCenterIds": _array(_string()),
        "globalNetworking": _boolean,
        "mounts": _MOUNTS,
        "startJupyter": _boolean,
        "startSsh": _boolean,
        "templateId": _string(1),
    },
    required=("name",),
)
_POD_ACTION = _object({"action": _enum(*ACTIONS)}, required=("action",))
_CREATE_REGISTRY = _object(
    {"name": _string(1), "username": _string(1), "password": _string(1)},
    required=("name", "username", "password"),
)


# The checks other routes' modules build their bodies from (clusters).
closed_object, string, integer, boolean, enum = _object, _string, _integer, _boolean, _enum
string_map, string_array = _string_map, _array(_string())
mounts = _MOUNTS
"""The contract's `Mounts`, shared by pods and clusters (`CreateClusterRequest.mounts`)."""


def validate(check: Check, body: Any) -> None:
    """422 listing every violation of `check` in `body`."""
    _validate(check, body)


def _validate(check: Check, body: Any) -> None:
    problems: list[str] = []
    check(body, "$", problems)
    if problems:
        raise Problem(422, "Request validation failed.", errors=problems)


def check_create_pod(body: Any) -> None:
    _validate(_CREATE_POD, body)
    if "templateId" not in body and "image" not in body:
        raise Problem(422, "Request validation failed.", errors=["$: missing property 'image'"])
    _check_create_rules(body)


def _check_create_rules(body: dict[str, Any]) -> None:
    if ("gpu" in body) == ("cpu" in body):
        raise Problem(400, "exactly one of gpu or cpu must be set")
    mounts = body.get("mounts", {})
    if "persistent" in mounts and "network" in mounts:
        raise Problem(400, "mounts.persistent and mounts.network are mutually exclusive")
    if "cpu" in body and "persistent" in mounts:
        raise Problem(400, "mounts.persistent is not allowed on CPU pods")
    gpu = body.get("gpu", {})
    if gpu.get("allowedCudaVersions") and "minCudaVersion" in gpu:
        raise Problem(400, "gpu.allowedCudaVersions and gpu.minCudaVersion are mutually exclusive")
    for port in body.get("ports", []):
        check_port(port)


def check_port(port: str) -> None:
    match = _PORT.match(port)
    if match is None or not 1 <= int(match.group(1)) <= 65535:
        raise Problem(400, f"port {port!r} is not of the form <1-65535>/<http|tcp>")


def check_pod_action(body: Any) -> str:
    _validate(_POD_ACTION, body)
    return str(body["action"])


def check_create_registry(body: Any) -> None:
    _validate(_CREATE_REGISTRY, body)


_UPDATE_POD = _object(
    {
        "name": _string(1),
        "image": _string(),
        "args": _string(),
        "disk": _integer(1),
        "env": _string_map,
        "ports": _array(_string()),
        "registry": _nullable(_string()),
        "globalNetworking": _boolean,
        "locked": _boolean,
        "mounts": _MOUNTS,
        "templateId": _string(),
    }
)


def check_update_pod(body: Any) -> None:
    """`UpdatePodRequest`: every field optional, nothing else allowed."""
    _validate(_UPDATE_POD, body)


_VOLUME_SIZE = _integer(10, 4096)
_CREATE_VOLUME = _object(
    {
        "name": _string(1),
        "size": _VOLUME_SIZE,
        "dataCenter": _string(1),
        "type": _enum("STANDARD", "HIGH_PERFORMANCE"),
    },
    required=("name", "size", "dataCenter"),
)
_UPDATE_VOLUME = _object({"name": _string(1), "size": _VOLUME_SIZE})


def check_create_volume(body: Any) -> None:
    """`CreateNetworkVolumeRequest`."""
    _validate(_CREATE_VOLUME, body)


def check_update_volume(body: Any) -> None:
    """`UpdateNetworkVolumeRequest`: name and size only, at least one of them."""
    _validate(_UPDATE_VOLUME, body)
    if not body:
        raise Problem(422, "Request validation failed.", errors=["$: at least one property"])


def check_mount_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """A PATCH's `mounts` against the pod's: the kind is fixed at create, the network
    volume's id is immutable, and mounts cannot be cleared."""
    if after.get("network") == []:
        raise Problem(400, "mounts.network cannot be cleared")
    for kind in ("persistent", "network"):
        if kind in after and kind not in before:
            raise Problem(400, f"mounts.{kind}: the mount kind is fixed at create")
    old = [mount["volumeId"] for mount in before.get("network", [])]
    new = [mount["volumeId"] for mount in after.get("network", [])]
    if new and new != old:
        raise Problem(400, "mounts.network[0].volumeId is immutable")
