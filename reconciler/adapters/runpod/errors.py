"""Errors the RunPod client raises; callers never see `requests` exceptions.

Every error carries `status` (None when no HTTP answer came back), `detail` (the
problem+json detail RunPod sent, if any) and `in_doubt`: True when the request may
have taken effect although it failed, e.g. a create answered with 500 or cut off by a
timeout. The engine treats an in-doubt create as "an instance may exist"
(docs/architecture.md §4).
"""

from __future__ import annotations


class RunPodError(Exception):
    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        detail: str | None = None,
        in_doubt: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
        self.in_doubt = in_doubt


class AuthenticationError(RunPodError):
    """401: the key is missing, malformed or revoked."""


class PermissionDeniedError(RunPodError):
    """403: the key is valid but may not use this resource (e.g. a GPU pool)."""


class RunPodNotFound(RunPodError):
    """404: no such pod (or template, registry…)."""


class RunPodConflict(RunPodError):
    """409: not valid for the pod's current status (RunPod's answer to a pod action)."""


class InvalidRequestError(RunPodError):
    """422: the body breaks the contract. Our bug: never retried."""


class RejectedError(RunPodError):
    """400: a cross-field rule is broken or the GPU/data center has no capacity."""


class InsufficientBalanceError(RunPodError):
    """402: the account balance cannot pay for this; no other candidate will do."""


class RateLimitedError(RunPodError):
    """429: too many requests; `retry_after` says how long RunPod wants us to wait."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 429,
        detail: str | None = None,
        in_doubt: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, detail=detail, in_doubt=in_doubt)
        self.retry_after = retry_after


class RunPodServerError(RunPodError):
    """5xx: a transient failure upstream."""


class RunPodTransportError(RunPodError):
    """No usable HTTP answer: timeout, connection refused or reset, unreadable body."""


class DeadlinePassed(RunPodError):
    """The tick's deadline had passed: the request was not sent, or its answer was given
    up before its end (a read: never in doubt)."""


class AnswerTooLarge(RunPodError):
    """The answer's body was larger than the cap (`--runpod-max-answer-mib`): refused,
    never read whole."""


class InvalidId(RunPodError):
    """An id not of RunPod's form (`reconciler.core.domain.RUNPOD_ID`): never put in a
    URL path, where `.` or `..` would address another route."""


_BY_STATUS: dict[int, type[RunPodError]] = {
    400: RejectedError,
    401: AuthenticationError,
    402: InsufficientBalanceError,
    403: PermissionDeniedError,
    404: RunPodNotFound,
    409: RunPodConflict,
    422: InvalidRequestError,
}


def error_class_for(status: int) -> type[RunPodError]:
    """The error class for an HTTP status; unlisted 4xx fall back to the base class."""
    if status == 429:
        return RateLimitedError
    if status >= 500:
        return RunPodServerError
    return _BY_STATUS.get(status, RunPodError)
