"""The rules the Kubernetes simulator teaches about Services and EndpointSlices
(tests/kube/test_sim_services.py), checked on the real API server: the same bodies are
refused with the same words, and the same defaults are filled in."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.realk8s.plane import Plane


def _create(plane: Plane, body: dict[str, Any]) -> tuple[int, str]:
    done = plane.kubectl("create", "-f", "-", "-o", "json", input=yaml.safe_dump(body), check=False)
    return done.returncode, done.stdout + done.stderr


def _service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80}], **spec},
    }


def _slice(name: str, address: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "x"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address]}],
        "ports": [{"name": "http", "port": 8080}],
        **fields,
    }


REFUSED = [
    (_service("web.default"), "must not contain dots"),
    (_service("-web"), "RFC 1123 label"),
    (_service("noports", ports=[]), "spec.ports: Required value"),
    (
        _service("twoports", ports=[{"port": 80}, {"port": 81}]),
        "spec.ports[0].name: Required value",
    ),
    (_service("far", ports=[{"port": 70000}]), "between 1 and 65535"),
    (_service("proto", ports=[{"port": 80, "protocol": "HTTP"}]), "Unsupported value"),
    (_service("outside", clusterIP="192.168.0.9"), "does not match the current range"),
    (_slice("loop", "127.0.0.1"), "loopback"),
    (_slice("link", "169.254.1.1"), "link-local"),
    (_slice("zero", "0.0.0.0"), "unspecified"),
    (_slice("none", "10.1.2.3", endpoints=[{"addresses": []}]), "Required value"),
]


@pytest.mark.parametrize(
    ("body", "words"), REFUSED, ids=[b["metadata"]["name"] for b, _ in REFUSED]
)
def test_the_same_bodies_are_refused_with_the_same_words(plane: Plane, body, words):
    code, text = _create(plane, body)
    assert code != 0 and words in text, text


def test_a_name_may_start_with_a_digit(plane: Plane):
    """Service names are RFC 1123 labels since RelaxedServiceNameValidation (1.34 beta)."""
    code, text = _create(plane, _service("1web"))
    assert code == 0, text


def test_the_same_defaults_and_the_cluster_ip_kept(plane: Plane):
    code, text = _create(plane, _service("defaults-web"))
    assert code == 0, text
    spec = json.loads(text)["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ipFamilies"] == ["IPv4"] and spec["ipFamilyPolicy"] == "SingleStack"
    replaced = _service("defaults-web", ports=[{"port": 8080}])
    done = plane.kubectl("replace", "-f", "-", "-o", "json", input=yaml.safe_dump(replaced))
    assert json.loads(done.stdout)["spec"]["clusterIP"] == spec["clusterIP"]
    moved = _service("defaults-web", clusterIP="10.0.0.99")
    done = plane.kubectl("replace", "-f", "-", input=yaml.safe_dump(moved), check=False)
    assert done.returncode != 0 and "may not change once set" in done.stderr, done.stderr
    code, text = _create(plane, _slice("ok-slice", "10.1.2.3"))
    assert code == 0 and json.loads(text)["ports"][0]["protocol"] == "TCP", text
    body = json.loads(text)
    body.update(addressType="IPv6", endpoints=[{"addresses": ["fd00::1"]}])
    done = plane.kubectl("replace", "-f", "-", input=yaml.safe_dump(body), check=False)
    assert done.returncode != 0 and "field is immutable" in done.stderr, done.stderr
