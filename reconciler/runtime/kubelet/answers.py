"""What the kubelet endpoint answers when it refuses: its sentences, the error a route
raises, and the one mapping from any error to a status and a sentence (virtual-kubelet's
`errdefs` is the model)."""

from __future__ import annotations

from reconciler.core.logs.kubectl_logs import LogOptionsError
from reconciler.runtime.kubelet.auth import AuthError
from reconciler.runtime.logs.sources import LogError

NO_SSH_KEY = (
    "{} is not available: this runpod-reconciler runs without an SSH key "
    "(--ssh-key-file), so its instances have no SSH access"
)
STANDBY_MESSAGE = (
    "this runpod-reconciler replica is a standby: the leader serves pod "
    "logs (the node's InternalIP points at it once it leads)"
)
NOT_SUPPORTED = (
    "{} is not supported for pods on RunPod: an instance runs one container without a "
    "kubelet; use the instance's SSH (runpod.io/public-ip) or its ports"
)


class EndpointError(Exception):
    """A request the endpoint refuses: the HTTP status and a sentence for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


REFUSALS = (EndpointError, AuthError, LogError, LogOptionsError)
"""The errors that are a refusal with its own sentence: logged without a traceback."""


def answer_for(exc: Exception) -> tuple[int, str]:
    """The one mapping from an error to the endpoint's answer (status, sentence)."""
    match exc:
        case EndpointError() | AuthError() | LogError():
            return exc.status, exc.message
        case LogOptionsError():
            return 400, str(exc)
    # A reader gets a sentence, never a dropped connection, and no detail that could
    # carry what it should not see: the reconciler's log has the traceback.
    return 500, "the request could not be served; the reconciler's log says why"
