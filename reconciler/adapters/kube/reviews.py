"""Reviews: a kubelet's authentication (TokenReview) and authorization
(SubjectAccessReview) of its callers."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.kube.transport import KubeTransport


class Reviews:
    """TokenReviews and SubjectAccessReviews."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def token(self, token: str) -> dict[str, Any]:
        """The TokenReview status for a bearer token: `authenticated`, `user`, `error`."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        review = self._kube.request(
            "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=body
        )
        return dict(review.get("status") or {})

    def access(
        self, user: str, groups: list[str], uid: str, attributes: dict[str, str]
    ) -> tuple[bool, str]:
        """SubjectAccessReview: may `user` do `attributes`? (allowed, reason)"""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "uid": uid, "resourceAttributes": attributes},
        }
        review = self._kube.request(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body
        )
        status = review.get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason") or "")
