"""A compact JSON-schema subset of the RunPod v2 contract, for the bodies we exchange.

Written from the contract's facts (required fields, types, closed objects, enums),
covering only what the reconciler sends and reads. The tests validate every request
body the client sends and every pod, GPU list and error the simulator answers.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

STATUSES = ["PROVISIONING", "STARTING", "RUNNING", "EXITED", "ERROR", "TERMINATED"]
ACTIONS = ["start", "stop", "restart", "terminate"]
LEVELS = ["NONE", "LOW", "MEDIUM", "HIGH"]
CLOUDS = ["SECURE", "COMMUNITY"]
DATE_TIME = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$"
CUDA = r"^\d+\.\d+$"

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_NULLABLE_STRING = {"type": ["string", "null"]}


def _closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


MOUNTS = _closed(
    {
        "persistent": _closed(
            {"size": {"type": "integer", "minimum": 10}, "path": {"type": "string"}},
            ["size", "path"],
        ),
        "network": {
            "type": "array",
            "maxItems": 1,
            "items": _closed(
                {"volumeId": {"type": "string"}, "path": {"type": "string"}}, ["volumeId", "path"]
            ),
        },
    }
)

CREATE_POD_REQUEST: dict[str, Any] = {
    **_closed(
        {
            "name": {"type": "string", "minLength": 1},
            "image": {"type": "string"},
            "args": {"type": "string"},
            "disk": {"type": "integer", "minimum": 1},
            "env": _STRING_MAP,
            "ports": _STRINGS,
            "registry": _NULLABLE_STRING,
            "cloud": {"enum": CLOUDS},
            "cpu": _closed(
                {"id": {"type": "string", "minLength": 1}, "vcpuCount": {"type": "integer"}},
                ["id", "vcpuCount"],
            ),
            "gpu": _closed(
                {
                    "id": {"type": "string"},
                    "count": {"type": "integer", "minimum": 1},
                    "allowedCudaVersions": {"type": "array", "items": {"pattern": CUDA}},
                    "minCudaVersion": {"type": "string", "pattern": CUDA},
                },
                ["id"],
            ),
            "dataCenterIds": _STRINGS,
            "globalNetworking": {"type": "boolean"},
            "mounts": MOUNTS,
            "startJupyter": {"type": "boolean"},
            "startSsh": {"type": "boolean"},
            "templateId": {"type": "string", "minLength": 1},
        },
        ["name"],
    ),
    "if": {"not": {"required": ["templateId"]}},
    "then": {"required": ["image"]},
}

POD_ACTION_REQUEST = _closed({"action": {"enum": ACTIONS}}, ["action"])

CREATE_REGISTRY_REQUEST = _closed(
    {name: {"type": "string", "minLength": 1} for name in ("name", "username", "password")},
    ["name", "username", "password"],
)

_SSH_ENDPOINT = {
    "anyOf": [
        {"type": "null"},
        {
            "type": "object",
            "required": ["host", "port", "username", "command"],
            "properties": {"port": {"type": "integer"}, "host": {"type": "string"}},
        },
    ]
}

_RUNTIME_PORT = {
    "type": "object",
    "properties": {
        "private": {"type": "integer"},
        "public": {"type": ["integer", "null"]},
        "type": {"type": "string"},
        "ip": _NULLABLE_STRING,
    },
}

POD: dict[str, Any] = {
    "type": "object",
    "required": [
        "id",
        "name",
        "status",
        "actions",
        "image",
        "args",
        "disk",
        "mounts",
        "ports",
        "env",
        "registry",
        "cloud",
        "dataCenterId",
        "cudaVersion",
        "ssh",
        "template",
        "cost",
        "locked",
        "runtime",
        "createdAt",
        "startedAt",
        "globalNetworking",
    ],
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "status": {"enum": STATUSES},
        "actions": {"type": "array", "items": {"enum": ACTIONS}},
        "image": {"type": "string"},
        "args": {"type": "string"},
        "disk": {"type": "integer", "minimum": 1},
        "mounts": MOUNTS,
        "ports": _STRINGS,
        "env": _STRING_MAP,
        "registry": _NULLABLE_STRING,
        "gpu": {
            "type": "object",
            "required": ["id"],
            "properties": {"id": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
        },
        "cloud": {"enum": CLOUDS},
        "dataCenterId": _NULLABLE_STRING,
        "cudaVersion": _NULLABLE_STRING,
        "ssh": {
            "type": "object",
            "required": ["proxy", "direct"],
            "properties": {"proxy": _SSH_ENDPOINT, "direct": _SSH_ENDPOINT},
        },
        "template": _NULLABLE_STRING,
        "cost": {"type": "number"},
        "locked": {"type": "boolean"},
        "globalNetworking": {
            "type": "object",
            "required": ["enabled"],
            "properties": {"enabled": {"type": "boolean"}},
        },
        "runtime": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "uptime": {"type": "integer"},
                        "ports": {"type": "array", "items": _RUNTIME_PORT},
                    },
                },
            ]
        },
        "createdAt": {"type": "string", "pattern": DATE_TIME},
        "startedAt": {"type": ["string", "null"], "pattern": DATE_TIME},
    },
}

LIST_PODS = {
    "type": "object",
    "required": ["pods"],
    "properties": {"pods": {"type": "array", "items": POD}},
}

_PER_CLOUD_NUMBER = {
    "type": "object",
    "required": ["secure", "community"],
    "properties": {"secure": {"type": "number"}, "community": {"type": "number"}},
}

GPU_TYPE = {
    "type": "object",
    "required": [
        "id",
        "name",
        "pool",
        "manufacturer",
        "memory",
        "secure",
        "community",
        "price",
        "maxCount",
    ],
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "pool": _NULLABLE_STRING,
        "manufacturer": {"enum": ["NVIDIA", "AMD", "UNKNOWN"]},
        "memory": {"type": "integer"},
        "secure": {"type": "boolean"},
        "community": {"type": "boolean"},
        "price": _PER_CLOUD_NUMBER,
        "maxCount": {
            "type": "object",
            "required": ["secure", "community"],
            "properties": {"secure": {"type": "integer"}, "community": {"type": "integer"}},
        },
        "availability": {"enum": LEVELS},
        "dataCenters": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "name", "availability"],
                "properties": {"availability": {"enum": LEVELS}},
            },
        },
    },
}

LIST_GPU_TYPES = {
    "type": "object",
    "required": ["gpus"],
    "properties": {"gpus": {"type": "array", "items": GPU_TYPE}},
}

ERROR_RESPONSE = {
    "type": "object",
    "required": ["title", "status", "detail"],
    "properties": {
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": _STRINGS,
    },
}

REGISTRY = {
    "type": "object",
    "required": ["id", "name"],
    "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
}

# Request bodies by (method, path pattern) as logged by the simulator.
# UpdatePodRequest: every field optional, nothing else (unevaluatedProperties: false).
UPDATE_POD_REQUEST: dict[str, Any] = _closed(
    {
        "name": {"type": "string", "minLength": 1},
        "image": {"type": "string"},
        "args": {"type": "string"},
        "disk": {"type": "integer", "minimum": 1},
        "env": _STRING_MAP,
        "ports": _STRINGS,
        "registry": _NULLABLE_STRING,
        "globalNetworking": {"type": "boolean"},
        "locked": {"type": "boolean"},
        "mounts": MOUNTS,
        "templateId": {"type": "string"},
    }
)

REQUEST_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v2/pods"): CREATE_POD_REQUEST,
    ("PATCH", "/v2/pods/*"): UPDATE_POD_REQUEST,
    ("POST", "/v2/pods/*/action"): POD_ACTION_REQUEST,
    ("POST", "/v2/registries"): CREATE_REGISTRY_REQUEST,
}


def validate(schema: dict[str, Any], document: Any) -> None:
    """Raise jsonschema.ValidationError when `document` breaks the contract."""
    Draft202012Validator.check_schema(schema)
    Draft202012Validator(schema).validate(document)
