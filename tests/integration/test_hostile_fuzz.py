"""Generated hostile values through both simulators over real HTTP.

Every annotation a user can set (on a pod, its Namespace) gets huge, negative, NaN,
signed, underscored, spaced, control-character and other scripts' digit values: the
tick never fails, a deleted pod's instance is still terminated in it, and the pod either
runs or carries a reason (a Warning Event), every message free of raw control characters.
Every kubelet query option gets the same values: the answer is 200, or a 400 (503 beyond
the log share) with a sentence, never a dropped connection. The explicit cases the
issue found are examples first."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reconciler.core.money.namespace_caps import (
    MAX_HOURLY_SPEND_ANNOTATION,
    MAX_INSTANCES_ANNOTATION,
)
from reconciler.core.pods.offload import MAX_PENDING_TIME_BEFORE_OFFLOAD
from reconciler.core.translate import annotations as ann
from reconciler.demo.sandbox import Sandbox

from .conftest import FAST

# These callers play the API server, which does not verify a kubelet's serving
# certificate unless started with --kubelet-certificate-authority (self-signed here).
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

POD_ANNOTATIONS = [
    ann.MANAGED,
    ann.OFFLOAD,
    MAX_PENDING_TIME_BEFORE_OFFLOAD,
    ann.REQUIRED_GPU_MEMORY,
    ann.GPU_TYPES,
    ann.MAX_PRICE,
    ann.CLOUD_TYPE,
    ann.DATACENTER_IDS,
    ann.PORTS,
    ann.CONTAINER_DISK_GB,
    ann.VOLUME_GB,
    ann.VOLUME_MOUNT_PATH,
    ann.NETWORK_VOLUME_ID,
    ann.TEMPLATE_ID,
    ann.TEMPLATE_ID_LEGACY,
    ann.CONTAINER_REGISTRY_AUTH_ID,
    ann.DEFAULT_CONTAINER,
]
NAMESPACE_ANNOTATIONS = [MAX_INSTANCES_ANNOTATION, MAX_HOURLY_SPEND_ANNOTATION]
LOG_OPTIONS = ["tailLines", "limitBytes", "sinceSeconds", "sinceTime", "timestamps", "previous"]

HOSTILE = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(
        ["NaN", "-nan", "inf", "1e400", "1e30", "0_1", " 1 ", "+5", "-0", "", " ", "maybe"]
    ),
    st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=6),
    st.text(st.characters(categories=["Cc", "Cf", "Zl", "Zp", "Nd", "Ll"]), max_size=40),
    st.lists(st.integers(0, 70000).map(lambda p: f"{p}/tcp"), max_size=200).map(",".join),
    st.text(max_size=200),
)
CONTROL = {chr(c) for c in range(32)} | {"\x7f", "\u2028", "\u2029", "\u202e"}
_names = itertools.count()


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox(FAST, tls=True) as sandbox:
        sandbox.start_kubelet()
        sandbox.configure(log_read_share=0.5)
        yield sandbox


def _clean(text: str) -> bool:
    return not CONTROL & set(text)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pod_annotation=st.sampled_from(POD_ANNOTATIONS),
    namespace_annotation=st.sampled_from(NAMESPACE_ANNOTATIONS),
    value=HOSTILE,
)
@example(ann.PORTS, MAX_INSTANCES_ANNOTATION, ",".join(f"{p}/tcp" for p in range(1000, 1200)))
@example(MAX_PENDING_TIME_BEFORE_OFFLOAD, MAX_INSTANCES_ANNOTATION, "NaN")
@example(MAX_PENDING_TIME_BEFORE_OFFLOAD, MAX_HOURLY_SPEND_ANNOTATION, "1" + "0" * 30)
@example(ann.OFFLOAD, MAX_INSTANCES_ANNOTATION, "maybe")
@example(ann.DATACENTER_IDS, MAX_INSTANCES_ANNOTATION, "EU-RO-1\x00")
@example(ann.CONTAINER_DISK_GB, MAX_INSTANCES_ANNOTATION, "\uff15\uff10")
@example(ann.MAX_PRICE, MAX_HOURLY_SPEND_ANNOTATION, "0_1")
@example(ann.REQUIRED_GPU_MEMORY, MAX_INSTANCES_ANNOTATION, " 24 ")
@example(ann.MAX_PRICE, MAX_INSTANCES_ANNOTATION, "9" * 31)
def test_hostile_annotations_are_a_reason_and_the_tick_terminates(
    box: Sandbox, pod_annotation: str, namespace_annotation: str, value: str
) -> None:
    n = next(_names)
    victim = box.add_pod(f"victim-{n}")
    box.tick()
    assert box.instance_for(victim) is not None
    namespace = f"hostile-{n}"
    box.ensure_namespace(namespace)
    obj: dict[str, Any] = box.kube_sim.get("namespaces", None, namespace) or {}
    obj["metadata"]["annotations"] = {namespace_annotation: value}
    box.kube_sim.put("namespaces", obj)
    hostile = box.add_pod(f"hostile-{n}", namespace=namespace, annotations={pod_annotation: value})
    box.kube_sim.delete_pod("default", f"victim-{n}", grace_seconds=30)
    report = box.tick()
    assert not report.errors, report.errors
    assert box.instance_for(victim) is None  # terminated in the same tick
    events = box.events(f"hostile-{n}", namespace)
    assert all(_clean(e["message"]) for e in events)
    told = [e for e in events if e["type"] == "Warning"]
    assert told or box.instance_for(hostile) is not None, events
    box.tick()
    box.advance(60)


@pytest.fixture(scope="module")
def admin(box: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    where: Path = tmp_path_factory.mktemp("certs")
    return box.kube_sim.client_ca.issue_client("ops", ("system:masters",)).write(where, "ops")


@pytest.fixture(scope="module")
def talker(box: Sandbox) -> str:
    box.add_pod("talker", command=["python", "talk.py"])
    box.tick()
    box.advance(30)
    box.tick()
    return "talker"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(option=st.sampled_from(LOG_OPTIONS), value=HOSTILE)
@example("sinceSeconds", "99999999999")
@example("sinceTime", "9999-12-31T23:59:59-14:00")
@example("sinceTime", "0001-01-01T00:00:00+14:00")
@example("tailLines", "\u0663")
def test_hostile_log_options_get_200_or_a_sentence(
    box: Sandbox, admin: tuple[str, str], talker: str, option: str, value: str
) -> None:
    answer = requests.get(
        f"https://127.0.0.1:{box.settings.kubelet.port}/containerLogs/default/{talker}/main",
        params={option: value},
        verify=False,
        timeout=10,
        cert=admin,
    )
    assert answer.status_code in (200, 400, 503), answer.text
    if answer.status_code != 200:
        assert answer.text.strip() and _clean(answer.text.strip()), answer.text


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (ann.PORTS, ",".join(f"{p}/tcp" for p in range(1000, 1200))),
        (ann.PORTS, "\uff18\uff10/http"),
        (MAX_PENDING_TIME_BEFORE_OFFLOAD, "NaN"),
        (MAX_PENDING_TIME_BEFORE_OFFLOAD, "1" + "0" * 30),
        (ann.OFFLOAD, "maybe"),
        (ann.DATACENTER_IDS, "EU-RO-1\x00"),
        (ann.CONTAINER_DISK_GB, "\uff15\uff10"),
        (ann.CONTAINER_DISK_GB, " 50 "),
        (ann.MAX_PRICE, "0_1"),
        (ann.MAX_PRICE, "+5"),
        (ann.REQUIRED_GPU_MEMORY, "+24"),
    ],
)
def test_lenient_values_are_a_reason_not_a_setting(
    box: Sandbox, annotation: str, value: str
) -> None:
    n = next(_names)
    pod = box.add_pod(f"lenient-{n}", annotations={annotation: value})
    box.tick()
    assert box.instance_for(pod) is None
    told = [e for e in box.events(f"lenient-{n}") if e["reason"] == "InvalidAnnotation"]
    assert told and annotation in told[0]["message"], box.events(f"lenient-{n}")
