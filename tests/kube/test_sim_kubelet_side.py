"""The simulated API server's side of kubelets: TokenReview and SubjectAccessReview
answered from its users and RBAC (with validation a sloppy client fails), the client CA
published in extension-apiserver-authentication, and pods/log checked as a real API
server checks it before it calls the node's kubelet (a node whose first preferred
address is an unresolvable Hostname breaks every call, as in a real cluster)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests

from reconciler.adapters.kube.client import KubeClient
from reconciler.sim.kube.simulator import KubeSimulator

from .conftest import PodFactory


def _get(sim: KubeSimulator, path: str, **params: str) -> requests.Response:
    return requests.get(
        sim.base_url + path,
        params=params,
        timeout=5,
        headers={"Authorization": f"Bearer {sim.token}"},
    )


def _node(sim: KubeSimulator, addresses: list[dict[str, str]], port: int = 10250) -> None:
    sim.put(
        "nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {
                "addresses": addresses,
                "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            },
        },
    )


def test_token_review_knows_the_simulators_users(sim: KubeSimulator, kube: KubeClient) -> None:
    sim.add_user("jane-token", "jane", ["devs"])
    status = kube.reviews.token("jane-token")
    assert status["authenticated"] is True
    assert status["user"]["username"] == "jane"
    assert set(status["user"]["groups"]) == {"devs", "system:authenticated"}
    assert kube.reviews.token("nobody")["authenticated"] is False


def test_subject_access_review_follows_rbac(sim: KubeSimulator, kube: KubeClient) -> None:
    attributes = {"verb": "get", "resource": "nodes", "subresource": "proxy", "name": "n1"}
    assert kube.reviews.access("jane", [], "", attributes)[0] is False
    assert kube.reviews.access("kube-apiserver-kubelet-client", [], "", attributes)[0] is True
    assert kube.reviews.access("root", ["system:masters"], "", attributes)[0] is True
    sim.add_rbac(
        [
            {
                "kind": "ClusterRole",
                "metadata": {"name": "logs"},
                "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}],
            },
            {
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "devs-logs"},
                "roleRef": {"kind": "ClusterRole", "name": "logs"},
                "subjects": [{"kind": "Group", "name": "devs"}],
            },
        ]
    )
    assert kube.reviews.access("jane", ["devs"], "", attributes)[0] is True
    assert kube.reviews.access("jane", ["devs"], "", {**attributes, "verb": "create"})[0] is False


@pytest.mark.parametrize(
    "spec",
    [
        {"resourceAttributes": {"verb": "get", "resource": "nodes"}},  # nobody asked about
        {"user": "jane"},  # nothing asked
    ],
)
def test_subject_access_review_validation(sim: KubeSimulator, spec: dict[str, Any]) -> None:
    answer = requests.post(
        sim.base_url + "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        json={"spec": spec},
        timeout=5,
        headers={"Authorization": f"Bearer {sim.token}"},
    )
    assert answer.status_code == 422 and answer.json()["reason"] == "Invalid"


def test_reviews_are_created_only(sim: KubeSimulator) -> None:
    listing = _get(sim, "/apis/authentication.k8s.io/v1/tokenreviews")
    assert listing.status_code == 405


def test_the_client_ca_is_published(sim: KubeSimulator, kube: KubeClient) -> None:
    data = kube.cluster.read_config_map("kube-system", "extension-apiserver-authentication") or {}
    assert data["client-ca-file"].startswith("-----BEGIN CERTIFICATE-----")


def test_pod_log_is_checked_before_the_kubelet_is_called(
    sim: KubeSimulator, make_pod: PodFactory
) -> None:
    make_pod("unbound")
    unbound = _get(sim, "/api/v1/namespaces/default/pods/unbound/log")
    assert unbound.status_code == 400
    assert unbound.json()["message"] == "pod unbound does not have a host assigned"
    assert _get(sim, "/api/v1/namespaces/default/pods/missing/log").status_code == 404
    sim.create_pod(
        {
            "metadata": {"name": "two"},
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}],
            },
        }
    )
    _node(sim, [{"type": "InternalIP", "address": "127.0.0.1"}])
    two = _get(sim, "/api/v1/namespaces/default/pods/two/log")
    assert two.status_code == 400
    assert (
        "a container name must be specified for pod two, choose one of: [a b]"
        in two.json()["message"]
    )
    wrong = _get(sim, "/api/v1/namespaces/default/pods/two/log", container="c")
    assert wrong.status_code == 400
    negative = _get(sim, "/api/v1/namespaces/default/pods/two/log", container="a", tailLines="-1")
    assert negative.status_code == 422


def test_an_unresolvable_hostname_breaks_pod_logs(sim: KubeSimulator) -> None:
    sim.create_pod(
        {
            "metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "x"}]},
        }
    )
    _node(
        sim,
        [
            {"type": "Hostname", "address": "virtual-runpod"},
            {"type": "InternalIP", "address": "127.0.0.1"},
        ],
    )
    answer = _get(sim, "/api/v1/namespaces/default/pods/p/log")
    assert answer.status_code == 500
    assert "lookup virtual-runpod: no such host" in answer.json()["message"]


def test_a_kubelet_that_does_not_answer(sim: KubeSimulator) -> None:
    sim.create_pod(
        {
            "metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "x"}]},
        }
    )
    _node(sim, [{"type": "InternalIP", "address": "127.0.0.1"}], _closed_port())
    answer = _get(sim, "/api/v1/namespaces/default/pods/p/log")
    assert answer.status_code == 500 and "connection refused" in answer.json()["message"]


def _closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
