"""Errors of the Kubernetes adapter: the rest of the code catches these, never the client's.

Each keeps the HTTP status (None for transport failures) and the API's own message;
the original exception is chained as the cause.
"""

from __future__ import annotations

import json


class KubeError(Exception):
    def __init__(self, message: str, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason

    def __str__(self) -> str:
        prefix = f"{self.status} {self.reason}".strip() if self.status else self.reason
        return f"{prefix}: {self.message}" if prefix else self.message


class KubeNotFound(KubeError):
    """404: the object (or its namespace) does not exist."""


class KubeConflict(KubeError):
    """409: stale resourceVersion, failed precondition, or the object already exists."""


class KubeGone(KubeError):
    """410: a watch asked for history the server no longer keeps; list again."""


class KubeForbidden(KubeError):
    """403: RBAC does not grant this verb on this resource."""


class KubeInvalid(KubeError):
    """422 or 400: the API rejected what we sent; retrying will not help."""


class KubeServerError(KubeError):
    """5xx: the API server failed; worth retrying later."""


class KubeTransportError(KubeError):
    """No answer: connection refused or reset, TLS failure, timeout."""


_BY_STATUS: dict[int, type[KubeError]] = {
    400: KubeInvalid,
    403: KubeForbidden,
    404: KubeNotFound,
    409: KubeConflict,
    410: KubeGone,
    422: KubeInvalid,
}


def error_for(status: int, body: bytes | str | None, fallback: str = "") -> KubeError:
    """The adapter error for an HTTP error answer whose body is (usually) a `Status`."""
    message, reason = fallback or f"HTTP {status}", ""
    try:
        parsed = json.loads(body or b"")
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        message = str(parsed.get("message") or message)
        reason = str(parsed.get("reason") or "")
    cls = _BY_STATUS.get(status, KubeServerError if status >= 500 else KubeError)
    return cls(message, status, reason)
