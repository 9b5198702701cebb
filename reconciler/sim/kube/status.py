"""API errors and the `Status` objects the API server answers them with."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error answer: HTTP code, machine-readable reason, human message."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def not_found(plural: str, name: str) -> ApiError:
    return ApiError(404, f'{plural} "{name}" not found', details={"name": name, "kind": plural})


def already_exists(plural: str, name: str) -> ApiError:
    return ApiError(
        409, f'{plural} "{name}" already exists', "AlreadyExists", {"name": name, "kind": plural}
    )


def conflict(plural: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {plural} "{name}": {why}',
        "Conflict",
        {"name": name, "kind": plural},
    )


def invalid(kind: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one cause per (field, problem), like the API server's field errors."""
    text = "; ".join(f"{field}: {problem}" for field, problem in causes)
    return ApiError(
        422,
        f'{kind} "{name}" is invalid: {text}',
        "Invalid",
        {
            "name": name,
            "kind": kind,
            "causes": [
                {"reason": "FieldValueInvalid", "message": problem, "field": field}
                for field, problem in causes
            ],
        },
    )


def success(code: int = 200) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
