"""What RunPod's answer to a create means, as `core.capacity.refusals` names it: the one reading
of an error for every create (instances, clusters)."""

from __future__ import annotations

from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.core.capacity.refusals import RefusalKind

_REFUSAL_KINDS: tuple[tuple[type[runpod_errors.RunPodError], RefusalKind], ...] = (
    (runpod_errors.RejectedError, RefusalKind.NO_STOCK),
    (runpod_errors.PermissionDeniedError, RefusalKind.FORBIDDEN),
    (runpod_errors.InsufficientBalanceError, RefusalKind.NO_BALANCE),
    (runpod_errors.RateLimitedError, RefusalKind.RATE_LIMITED),
    (runpod_errors.DeadlinePassed, RefusalKind.RATE_LIMITED),
    (runpod_errors.AuthenticationError, RefusalKind.UNAUTHORIZED),
    (runpod_errors.InvalidRequestError, RefusalKind.INVALID_REQUEST),
)


def refusal_kind(
    exc: runpod_errors.RunPodError, template_id: str | None = None
) -> RefusalKind | None:
    """What RunPod's answer to a create means; None when a create may have happened.

    A 404 names what the request referred to that RunPod lacks: registry credentials are
    checked before the create, so a template when one was named, otherwise another id
    from the pod's annotations (network volume).
    """
    if isinstance(exc, runpod_errors.RunPodNotFound):
        return RefusalKind.TEMPLATE_NOT_FOUND if template_id else RefusalKind.ID_NOT_FOUND
    for error, kind in _REFUSAL_KINDS:
        if isinstance(exc, error):
            return kind
    return None if exc.in_doubt else RefusalKind.OTHER
