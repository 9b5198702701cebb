"""The one error translation raises.

Its reason is a `PodReason`: what `kubectl get pod` shows in its STATUS column.
`permanent` tells the planner whether the pod can ever run as specified: a permanent
error fails the pod now; any other leaves it Pending with the reason and is retried
every tick, because the user can still fix an annotation or create a missing Secret (the
planner fails it after `max_pending_time`).
"""

from __future__ import annotations

from reconciler.core.printable import quoted
from reconciler.core.reasons import PodReason


class TranslationError(Exception):
    """A pod that cannot be turned into a RunPod instance as it stands.

    The message is one sentence for the pod's Event. It names annotations, Secrets and
    keys, never a Secret value.
    """

    def __init__(self, reason: PodReason, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.permanent = permanent

    def __repr__(self) -> str:
        return (
            f"TranslationError(reason={self.reason!r}, message={self.message!r}, "
            f"permanent={self.permanent})"
        )


def invalid_annotation(name: str, value: str, expected: str) -> TranslationError:
    return TranslationError(
        PodReason.INVALID_ANNOTATION,
        f"annotation {name}: {quoted(value)} is not {expected}",
        permanent=False,
    )
