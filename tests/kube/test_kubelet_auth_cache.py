"""The kubelet endpoint's answers are cached as the kubelet caches them (docs/guides/logs.md,
"Security, as a kubelet's"): a token's review for 2 minutes, an allowed access review
for 5 minutes, a denied one for 30 seconds. Counted as the TokenReviews and
SubjectAccessReviews the API server simulator receives, on a simulated clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.adapters.kube.client import KubeClient
from reconciler.runtime.kubelet.auth import Authenticator, AuthError
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.simulator import KubeSimulator

NODE = "virtual-runpod"
GRANT = [
    {
        "kind": "ClusterRole",
        "metadata": {"name": "node-proxy"},
        "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}],
    },
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "ops-node-proxy"},
        "roleRef": {"kind": "ClusterRole", "name": "node-proxy"},
        "subjects": [{"kind": "User", "name": "ops"}],
    },
    {
        "kind": "ClusterRole",
        "metadata": {"name": "node-stats"},
        "rules": [{"apiGroups": [""], "resources": ["nodes/stats"], "verbs": ["get"]}],
    },
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "scraper-node-stats"},
        "roleRef": {"kind": "ClusterRole", "name": "node-stats"},
        "subjects": [{"kind": "User", "name": "scraper"}],
    },
]


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def sim(clock: SimClock) -> Iterator[KubeSimulator]:
    server = KubeSimulator("admin-token", clock=clock).start()
    server.add_user("ops-token", "ops")
    server.add_user("jane-token", "jane")
    server.add_user("scraper-token", "scraper")
    server.add_rbac(GRANT)
    yield server
    server.stop()


@pytest.fixture
def auth(sim: KubeSimulator, clock: SimClock) -> Authenticator:
    return Authenticator(KubeClient(sim.api_client(), now=clock.now), NODE, clock.monotonic)


def reviews(sim: KubeSimulator, kind: str) -> int:
    return sum(1 for _method, path, _query, _status in sim.requests if path.endswith(kind))


def call(auth: Authenticator, token: str) -> None:
    auth.authorize(auth.authenticate(None, f"Bearer {token}"), "GET", "/containerLogs/a/b/c")


def test_a_token_is_reviewed_again_after_2_minutes(
    auth: Authenticator, sim: KubeSimulator, clock: SimClock
) -> None:
    auth.authenticate(None, "Bearer ops-token")
    clock.advance(119)
    auth.authenticate(None, "Bearer ops-token")
    assert reviews(sim, "tokenreviews") == 1
    clock.advance(1)
    auth.authenticate(None, "Bearer ops-token")
    assert reviews(sim, "tokenreviews") == 2


def test_an_allowed_access_is_asked_again_after_5_minutes(
    auth: Authenticator, sim: KubeSimulator, clock: SimClock
) -> None:
    call(auth, "ops-token")
    clock.advance(299)
    call(auth, "ops-token")
    assert reviews(sim, "subjectaccessreviews") == 1
    clock.advance(1)
    call(auth, "ops-token")
    assert reviews(sim, "subjectaccessreviews") == 2


def denied(auth: Authenticator) -> None:
    with pytest.raises(AuthError) as refused:
        call(auth, "jane-token")
    assert refused.value.status == 403


def test_a_denied_access_is_asked_again_after_30_seconds(
    auth: Authenticator, sim: KubeSimulator, clock: SimClock
) -> None:
    denied(auth)
    clock.advance(29)
    denied(auth)
    assert reviews(sim, "subjectaccessreviews") == 1
    clock.advance(1)
    denied(auth)
    assert reviews(sim, "subjectaccessreviews") == 2


def as_scraper(auth: Authenticator, method: str, path: str) -> None:
    auth.authorize(auth.authenticate(None, "Bearer scraper-token"), method, path)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/containerLogs/ml/train/main"),
        ("POST", "/exec/ml/train/main"),
        ("GET", "/logs/"),
        ("POST", "/portForward/ml/train"),
    ],
)
def test_an_answer_for_one_subresource_is_never_served_for_another(
    auth: Authenticator, sim: KubeSimulator, method: str, path: str
) -> None:
    # metrics-server may read /stats; that allowance, cached, must not open a pod's
    # log or a shell: the cache is keyed by the subresource as well as the caller.
    as_scraper(auth, "GET", "/stats/summary")
    with pytest.raises(AuthError) as refused:
        as_scraper(auth, method, path)
    assert refused.value.status == 403
    assert reviews(sim, "subjectaccessreviews") == 2


def test_a_denial_for_one_subresource_does_not_deny_another(
    auth: Authenticator, sim: KubeSimulator
) -> None:
    with pytest.raises(AuthError):
        as_scraper(auth, "GET", "/containerLogs/ml/train/main")
    as_scraper(auth, "GET", "/stats/summary")
    assert reviews(sim, "subjectaccessreviews") == 2


def test_an_answer_for_one_verb_is_never_served_for_another(
    auth: Authenticator, sim: KubeSimulator
) -> None:
    # `ops` may `get` nodes/proxy (logs) but not `create` it (exec over POST).
    call(auth, "ops-token")
    with pytest.raises(AuthError) as refused:
        auth.authorize(auth.authenticate(None, "Bearer ops-token"), "POST", "/exec/a/b/c")
    assert refused.value.status == 403
