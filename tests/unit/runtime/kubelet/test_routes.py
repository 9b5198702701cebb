"""The kubelet endpoint's route table and its one mapping from errors to HTTP status:
segments and named segments match, a trailing `*` takes any rest, a method not listed
does not match, and every known refusal keeps its status while anything else is a 500
with a sentence that says nothing of the failure itself."""

from __future__ import annotations

import pytest

from reconciler.core.logs.kubectl_logs import LogOptionsError
from reconciler.runtime.kubelet.answers import EndpointError, answer_for
from reconciler.runtime.kubelet.auth import AuthError
from reconciler.runtime.kubelet.server import ROUTES
from reconciler.runtime.logs.sources import LogError


def matched(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    parts = [part for part in path.split("/") if part]
    for route in ROUTES:
        named = route.match(method, parts)
        if named is not None:
            return route.serve.__name__, named
    return None


def test_routes_match_by_method_and_segments() -> None:
    assert matched("GET", "/containerLogs/ns/web/main") == (
        "_container_logs",
        {"namespace": "ns", "pod": "web", "container": "main"},
    )
    assert matched("POST", "/containerLogs/ns/web/main") is None
    assert matched("GET", "/containerLogs/ns/web") is None
    assert matched("GET", "/containerLogs/ns/web/main/extra") is None
    assert matched("GET", "/healthz") == ("_healthz", {})
    assert matched("POST", "/exec/ns/web/main") == (
        "_exec",
        {"namespace": "ns", "pod": "web", "container": "main"},
    )
    assert matched("GET", "/portForward/ns/web") == (
        "_port_forward",
        {"namespace": "ns", "pod": "web"},
    )
    assert matched("PUT", "/exec/ns/web/main") == ("_not_supported", {})
    assert matched("GET", "/exec/ns/web") == ("_not_supported", {})
    assert matched("POST", "/run/ns/web/main") == ("_not_supported", {})
    assert matched("GET", "/pods") is None


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (EndpointError(501, "no"), 501),
        (AuthError(403, "Forbidden"), 403),
        (LogError(404, "no such pod"), 404),
        (LogOptionsError("tailLines must be"), 400),
    ],
)
def test_a_known_refusal_keeps_its_status_and_sentence(error: Exception, status: int) -> None:
    assert answer_for(error) == (status, str(error))


def test_anything_else_is_a_500_that_tells_nothing_of_it() -> None:
    status, sentence = answer_for(RuntimeError("token=hunter2"))
    assert status == 500 and "hunter2" not in sentence and "reconciler's log" in sentence
