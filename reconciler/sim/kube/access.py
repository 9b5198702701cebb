"""Who the simulated cluster knows, and TokenReview and SubjectAccessReview over them.

A kubelet authenticates a bearer token by creating a TokenReview and authorizes a
request by creating a SubjectAccessReview; this is the API server's side of both. Users
are the simulator's own token (its subject) plus any a test adds. What a user may do
comes from RBAC documents (the ones the simulator enforces, plus any a test adds), with
the cluster's built-in grants: `system:masters` may do anything, and the API server's
kubelet client holds `system:kubelet-api-admin`, as kubeadm binds it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.sim.kube.pki import APISERVER_KUBELET_CLIENT
from reconciler.sim.kube.rbac import Attributes, Authorizer
from reconciler.sim.kube.status import ApiError

MASTERS = "system:masters"
_BUILT_IN: tuple[dict[str, Any], ...] = (
    {
        "kind": "ClusterRole",
        "metadata": {"name": "system:kubelet-api-admin"},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "proxy"]},
            {
                "apiGroups": [""],
                "resources": [
                    "nodes/log",
                    "nodes/metrics",
                    "nodes/proxy",
                    "nodes/stats",
                    "nodes/configz",
                    "nodes/healthz",
                    "nodes/pods",
                ],
                "verbs": ["*"],
            },
        ],
    },
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "kubeadm:apiserver-kubelet-client"},
        "roleRef": {"kind": "ClusterRole", "name": "system:kubelet-api-admin"},
        "subjects": [{"kind": "User", "name": APISERVER_KUBELET_CLIENT}],
    },
)


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


@dataclass
class AccessModel:
    users: dict[str, User] = field(default_factory=dict)
    documents: list[dict[str, Any]] = field(default_factory=lambda: list(_BUILT_IN))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_user(self, token: str, name: str, groups: Sequence[str] = ()) -> None:
        with self._lock:
            self.users[token] = User(name, tuple(groups), f"uid-{name}")

    def add_rbac(self, documents: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self.documents.extend(documents)

    def allows(self, user: str, groups: Sequence[str], attrs: Attributes) -> bool:
        if MASTERS in groups:
            return True
        with self._lock:
            documents = list(self.documents)
        return Authorizer.from_documents(documents, user, groups).allows(attrs)

    def token_review(self, body: dict[str, Any]) -> dict[str, Any]:
        token = (body.get("spec") or {}).get("token")
        if not isinstance(token, str) or not token:
            raise ApiError(
                422,
                'TokenReview.authentication.k8s.io "" is invalid: spec.token: Required value',
                reason="Invalid",
            )
        with self._lock:
            user = self.users.get(token)
        status: dict[str, Any] = {"authenticated": False}
        if user is None:
            status["error"] = "[invalid bearer token, token lookup failed]"
        else:
            groups = [*user.groups, "system:authenticated"]
            status = {
                "authenticated": True,
                "user": {"username": user.name, "uid": user.uid, "groups": groups},
            }
        return _review(body, "authentication.k8s.io/v1", "TokenReview", status)

    def subject_access_review(self, body: dict[str, Any]) -> dict[str, Any]:
        spec = body.get("spec") or {}
        resource = spec.get("resourceAttributes")
        if not spec.get("user") and not spec.get("groups"):
            raise ApiError(
                422,
                'SubjectAccessReview.authorization.k8s.io "" is invalid: '
                'spec.user: Invalid value: "": at least one of user or group '
                "must be specified",
                reason="Invalid",
            )
        if (resource is None) == (spec.get("nonResourceAttributes") is None):
            raise ApiError(
                422,
                'SubjectAccessReview.authorization.k8s.io "" is invalid: '
                "spec.resourceAttributes: exactly one of nonResourceAttributes "
                "or resourceAttributes must be specified",
                reason="Invalid",
            )
        allowed = resource is not None and self.allows(
            spec.get("user", ""),
            spec.get("groups") or [],
            Attributes(
                resource.get("verb", ""),
                resource.get("group", ""),
                resource.get("resource", ""),
                resource.get("subresource", ""),
                resource.get("namespace", ""),
                resource.get("name", ""),
            ),
        )
        status: dict[str, Any] = {"allowed": allowed}
        if allowed:
            status["reason"] = "RBAC: allowed by the simulated cluster's bindings"
        return _review(body, "authorization.k8s.io/v1", "SubjectAccessReview", status)


def _review(
    body: dict[str, Any], api_version: str, kind: str, status: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"creationTimestamp": None},
        "spec": body.get("spec") or {},
        "status": status,
    }
