"""Request bodies in the Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`).

kubectl's imperative commands (`create secret|configmap|namespace|job`, `drain`'s
evictions) send built-in kinds as protobuf. The envelope is the magic `k8s\\0` then a
`runtime.Unknown` message: typeMeta (apiVersion, kind), raw (the object's own
message), contentEncoding, contentType. The object message is read with the wire
schema of its Go type (`protobuf_schema`) into the JSON the API server would have
received, so the rest of the simulator handles it like any JSON body. Fields are read
as Go's decoder then encoder would: empty `omitempty` values are left out, pointers
(set, even to zero) kept. An unknown kind or field is refused with 415, never guessed.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from reconciler.sim.kube.protobuf_schema import INLINE, MESSAGES, OMITEMPTY, POINTER, REPEATED
from reconciler.sim.kube.status import ApiError

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
# (apiVersion, kind) -> message decoded here.
DECODED_KINDS = {
    ("v1", "Secret"): "Secret",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Namespace"): "Namespace",
    ("batch/v1", "Job"): "Job",
    ("policy/v1", "Eviction"): "Eviction",
}
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5

Field = tuple[int, int, Any]  # (number, wire type, int or bytes)


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON object a protobuf request body stands for."""
    if not body.startswith(MAGIC):
        raise ApiError(
            400, "the protobuf body does not start with the Kubernetes magic number 'k8s\\x00'"
        )
    envelope = _group(_fields(body[len(MAGIC) :]))
    type_meta = _group(_fields(_one_bytes(envelope, 1)))
    api_version = _one_bytes(type_meta, 1).decode()
    kind = _one_bytes(type_meta, 2).decode()
    if _one_bytes(envelope, 3):
        raise ApiError(415, "protobuf bodies with a content encoding are not supported")
    message = DECODED_KINDS.get((api_version, kind))
    if message is None:
        raise ApiError(
            415,
            f"the simulator decodes protobuf bodies only for "
            f"{', '.join(k for _, k in DECODED_KINDS)}; got {api_version} {kind}",
        )
    obj = _message(_one_bytes(envelope, 2), message)
    return {"apiVersion": api_version, "kind": kind, **obj}


def _message(data: bytes, name: str) -> dict[str, Any]:
    schema = MESSAGES[name]
    result: dict[str, Any] = {}
    for number, wire, value in _fields(data):
        spec = schema.get(number)
        if spec is None:
            raise ApiError(415, f"the simulator cannot decode field {number} of {name}")
        json_name, kind, flags = spec
        values = _unpacked(value) if wire == _BYTES and kind in ("i", "b") else [value]
        for item in values:
            decoded = _value(item, kind, f"{name}.{json_name}")
            if flags & INLINE:
                result.update(decoded)
            elif flags & REPEATED:
                result.setdefault(json_name, []).append(decoded)
            elif kind.startswith("map:"):
                result.setdefault(json_name, {}).update(decoded)
            else:
                result[json_name] = decoded
    for json_name, _, flags in schema.values():
        if (
            json_name in result
            and flags & OMITEMPTY
            and not flags & POINTER
            and result[json_name] in ("", 0, False, None, {}, [])
        ):
            del result[json_name]
    return result


def _value(value: Any, kind: str, where: str) -> Any:
    if kind == "s":
        return bytes(value).decode()
    if kind == "i":
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == "b":
        return bool(value)
    if kind == "bytes":
        return base64.b64encode(value).decode()
    if kind.startswith("m:"):
        return _message(value, kind[2:])
    if kind.startswith("map:"):
        entry = _group(_fields(value))
        key = _one_bytes(entry, 1).decode()
        raw = entry.get(2, [b"" if kind[4:] != "i" else 0])[-1]
        return {key: _value(raw, kind[4:], where)}
    return _special(value, kind, where)


def _special(value: bytes, kind: str, where: str) -> Any:
    fields = _group(_fields(value))
    if kind == "time":
        seconds = fields.get(1, [0])[-1]
        return (
            datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if seconds else None
        )
    if kind == "qty":
        return _one_bytes(fields, 1).decode()
    if kind == "ios":
        if fields.get(1, [0])[-1] == 1:
            return _one_bytes(fields, 3).decode()
        return _value(fields.get(2, [0])[-1], "i", where)
    if kind == "raw":
        raw = _one_bytes(fields, 1)
        return json.loads(raw) if raw else None
    if kind == "dur":
        return f"{fields.get(1, [0])[-1] / 1e9:g}s"
    raise ApiError(415, f"the simulator cannot decode {where} ({kind})")


def _fields(data: bytes) -> list[Field]:
    fields: list[Field] = []
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, position = _varint(data, position)
        elif wire == _BYTES:
            length, position = _varint(data, position)
            if position + length > len(data):
                raise ApiError(400, "truncated protobuf body")
            value, position = data[position : position + length], position + length
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            value, position = (
                int.from_bytes(data[position : position + size], "little"),
                position + size,
            )
        else:
            raise ApiError(400, f"unsupported protobuf wire type {wire}")
        fields.append((number, wire, value))
    return fields


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise ApiError(400, "truncated protobuf varint")
        byte = data[position]
        result |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            return result, position
        shift += 7


def _unpacked(data: bytes) -> list[int]:
    values, position = [], 0
    while position < len(data):
        value, position = _varint(data, position)
        values.append(value)
    return values


def _group(fields: list[Field]) -> dict[int, list[Any]]:
    grouped: dict[int, list[Any]] = {}
    for number, _, value in fields:
        grouped.setdefault(number, []).append(value)
    return grouped


def _one_bytes(fields: dict[int, list[Any]], number: int) -> bytes:
    values = fields.get(number) or [b""]
    return bytes(values[-1])
