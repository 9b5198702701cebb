"""Ports: TCP containerPorts classified as http or tcp, UDP/SCTP left out, and the
runpod.io/ports override with its validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.reasons import PodReason
from reconciler.core.translate.annotations import PORTS
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.ports import container_ports, instance_ports, parse_ports

from ...conftest import build_job, build_pod


def test_well_known_http_ports_and_tcp_others() -> None:
    container = {
        "ports": [
            {"containerPort": 80},
            {"containerPort": 8888, "protocol": "TCP"},
            {"containerPort": 5432},
            {"containerPort": 53, "protocol": "UDP"},
            {"containerPort": 9999, "protocol": "SCTP"},
            {"containerPort": 80, "name": "again"},
        ]
    }
    assert container_ports(container) == ("80/http", "8888/http", "5432/tcp")


def test_annotation_overrides_container_ports() -> None:
    pod = build_pod(annotations={PORTS: " 8888/http, 22/TCP "}, ports=[{"containerPort": 80}])
    assert instance_ports(pod, None, pod["spec"]["containers"][0]) == ("8888/http", "22/tcp")


def test_annotation_on_job_applies_and_empty_exposes_nothing() -> None:
    pod = build_pod(ports=[{"containerPort": 80}])
    assert instance_ports(pod, build_job({PORTS: ""}), pod["spec"]["containers"][0]) == ()


@pytest.mark.parametrize(
    "value",
    [
        "8888",
        "8888/udp",
        "0/tcp",
        "65536/tcp",
        "http/8888",
        "22/tcp,,80/http",
        "22/tcp,22/http",
        "-1/tcp",
    ],
)
def test_malformed_override_is_rejected(value: str) -> None:
    with pytest.raises(TranslationError) as caught:
        parse_ports(value)
    assert caught.value.reason == PodReason.INVALID_ANNOTATION
    assert not caught.value.permanent
    assert PORTS in caught.value.message and value in caught.value.message


@given(
    st.lists(
        st.tuples(st.integers(1, 65535), st.sampled_from(["http", "tcp"])), unique_by=lambda p: p[0]
    )
)
def test_valid_overrides_round_trip(ports: list[tuple[int, str]]) -> None:
    expected = tuple(f"{number}/{protocol}" for number, protocol in ports)
    assert parse_ports(",".join(expected)) == expected
