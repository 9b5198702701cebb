"""Who is calling the kubelet endpoint, and may they: as the kubelet decides it.

Authentication, in the kubelet's order: a client certificate verified against the
cluster's client CA (the user is its CN, the groups its O values; the API server comes
this way), else a bearer token checked with a TokenReview. Anonymous callers get 401.

Authorization: a SubjectAccessReview for the user on the node, verb from the HTTP method,
subresource from the path: `/logs` is `nodes/log`, `/stats` `nodes/stats`, `/metrics`
`nodes/metrics`, `/spec` `nodes/spec`, everything else (`/containerLogs`, `/exec`…)
`nodes/proxy`. Answers are cached as the kubelet caches them (allowed for 5 minutes,
denied for 30 seconds, tokens for 2 minutes), so one `kubectl logs` costs no API call
once the API server's identity is known.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient

ALLOWED_TTL = 300.0
DENIED_TTL = 30.0
TOKEN_TTL = 120.0
_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_SUBRESOURCES = {"stats": "stats", "metrics": "metrics", "logs": "log", "spec": "spec"}


@dataclass(frozen=True)
class Caller:
    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""


class AuthError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def subresource_for(path: str) -> str:
    first = path.strip("/").split("/", 1)[0]
    return _SUBRESOURCES.get(first, "proxy")


def caller_from_certificate(peer: dict[str, Any] | None) -> Caller | None:
    """The user of a verified client certificate (as `ssl.getpeercert()` gives it)."""
    if not peer:
        return None
    user, groups = "", []
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName":
                groups.append(value)
    return Caller(user, (*groups, "system:authenticated")) if user else None


class Authenticator:
    def __init__(
        self, kube: KubeClient, node_name: str, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.kube, self.node_name, self.monotonic = kube, node_name, monotonic
        self._cache: dict[tuple[Any, ...], tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def authenticate(self, peer: dict[str, Any] | None, authorization: str | None) -> Caller:
        caller = caller_from_certificate(peer)
        if caller is not None:
            return caller
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError(401, "Unauthorized")
        return self._token_caller(token.strip())

    def authorize(self, caller: Caller, method: str, path: str) -> None:
        verb = _VERBS.get(method, method.lower())
        subresource = subresource_for(path)
        key = ("sar", caller, verb, subresource)
        allowed = self._cached(key)
        if allowed is None:
            try:
                allowed, _ = self.kube.reviews.access(
                    caller.user,
                    list(caller.groups),
                    caller.uid,
                    {
                        "verb": verb,
                        "resource": "nodes",
                        "subresource": subresource,
                        "name": self.node_name,
                        "group": "",
                        "version": "v1",
                    },
                )
            except kube_errors.KubeError as exc:
                raise AuthError(500, f"could not authorize the request: {exc}") from exc
            self._remember(key, allowed, ALLOWED_TTL if allowed else DENIED_TTL)
        if not allowed:
            raise AuthError(
                403,
                f"Forbidden (user={caller.user}, verb={verb}, "
                f"resource=nodes, subresource={subresource})",
            )

    def _token_caller(self, token: str) -> Caller:
        # The token itself is never kept: only its digest, as the cache key.
        key = ("token", hashlib.sha256(token.encode()).hexdigest())
        caller = self._cached(key)
        if caller is None:
            try:
                status = self.kube.reviews.token(token)
            except kube_errors.KubeError as exc:
                raise AuthError(500, f"could not authenticate the request: {exc}") from exc
            user = status.get("user") or {}
            caller = (
                Caller(
                    str(user.get("username", "")),
                    tuple(user.get("groups") or ()),
                    str(user.get("uid", "")),
                )
                if status.get("authenticated")
                else False
            )
            self._remember(key, caller, TOKEN_TTL)
        if not caller:
            raise AuthError(401, "Unauthorized")
        assert isinstance(caller, Caller)
        return caller

    def _cached(self, key: tuple[Any, ...]) -> Any:
        with self._lock:
            entry = self._cache.get(key)
            if entry is None or entry[0] <= self.monotonic():
                return None
            return entry[1]

    def _remember(self, key: tuple[Any, ...], value: Any, ttl: float) -> None:
        with self._lock:
            if len(self._cache) > 10_000:  # bounded: drop the expired, else everything
                now = self.monotonic()
                self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
                if len(self._cache) > 10_000:
                    self._cache.clear()
            self._cache[key] = (self.monotonic() + ttl, value)
