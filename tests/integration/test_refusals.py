"""Definite answers treated as definite, and bad pod input stopped before RunPod hears of
it: a template RunPod does not have (404) gives the pod TemplateNotFound and
an Event at once, is retried once a minute, not every tick, and fails the pod at
--max-pending-time; an unknown data center or registry credential is InvalidAnnotation,
never capacity; invalid image references and out-of-range sizes create nothing; a
malformed pod affects only itself."""

from __future__ import annotations

import pytest

from reconciler.core.capacity.refusals import REFUSAL_RETRY_SECONDS
from reconciler.demo.sandbox import Sandbox

from .test_limits import status_reason


def creates(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods"))


def event_reasons(box: Sandbox, name: str) -> list[str]:
    return [e["reason"] for e in box.events(name)]


def test_unknown_template_is_its_own_reason_at_once_and_fails_at_the_deadline(
    box: Sandbox,
) -> None:
    box.add_pod("t", annotations={"runpod.io/template-id": "no-such-template"})
    box.tick()
    assert event_reasons(box, "t") == ["TemplateNotFound"]
    [row] = box.store.load_rows()
    assert (row.state.value, row.reason) == ("pending", "TemplateNotFound")
    assert "no-such-template" in (row.last_error or "")
    box.tick()
    assert status_reason(box, "t") == "TemplateNotFound"
    assert (box.pod("t") or {})["status"]["phase"] == "Pending"
    assert creates(box) == 1  # not again within the minute
    box.advance(REFUSAL_RETRY_SECONDS)
    box.tick()
    assert creates(box) == 2
    assert event_reasons(box, "t") == ["TemplateNotFound"]  # the same reason: no new Event
    box.advance(box.settings.timing.max_pending_time)
    box.tick()
    pod = box.pod("t") or {}
    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", "TemplateNotFound")
    assert box.owned_instances() == []


def test_a_template_created_later_lets_the_retry_succeed(box: Sandbox) -> None:
    box.add_pod("t", annotations={"runpod.io/template-id": "tpl-late"})
    box.tick()
    box.runpod_sim.account.add_template("tpl-late", image="python:3.11")
    box.advance(REFUSAL_RETRY_SECONDS)
    box.tick()
    assert box.instance_for(box.pod("t") or {}) is not None
    answered = [
        (r.status, r.body.get("templateId"))
        for r in box.runpod_sim.requests
        if (r.method, r.path) == ("POST", "/v2/pods")
    ]
    assert answered == [(404, "tpl-late"), (201, "tpl-late")]


def test_unknown_data_center_is_an_invalid_annotation_and_creates_nothing(
    box: Sandbox,
) -> None:
    box.add_pod("mars", annotations={"runpod.io/datacenter-ids": "MARS-1"})
    box.tick()
    box.tick()
    assert status_reason(box, "mars") == "InvalidAnnotation"
    assert event_reasons(box, "mars") == ["InvalidAnnotation"]
    message = (box.pod("mars") or {})["status"]["containerStatuses"][0]["state"]["waiting"][
        "message"
    ]
    assert "runpod.io/datacenter-ids" in message and "MARS-1" in message
    assert creates(box) == 0


def test_unknown_registry_credential_is_an_invalid_annotation_and_creates_nothing(
    box: Sandbox,
) -> None:
    box.add_pod("priv", annotations={"runpod.io/container-registry-auth-id": "cred-404"})
    box.tick()
    box.tick()
    assert status_reason(box, "priv") == "InvalidAnnotation"
    assert event_reasons(box, "priv") == ["InvalidAnnotation"]
    assert creates(box) == 0


@pytest.mark.parametrize(
    "image",
    ["python 3.11", "python:3.11;rm -rf /", "pytörch:2", "$(curl evil)", "UPPER/Name", "a" * 300],
)
def test_invalid_image_references_create_nothing(box: Sandbox, image: str) -> None:
    box.add_pod("bad", image=image)
    box.tick()
    box.tick()
    assert status_reason(box, "bad") == "InvalidImageName"
    assert event_reasons(box, "bad") == ["InvalidImageName"]
    assert creates(box) == 0


@pytest.mark.parametrize(
    ("annotation", "value", "accepted"),
    [
        ("runpod.io/container-disk-gb", "99999999999", "from 1 to 10000"),
        ("runpod.io/volume-gb", "5", "from 10 to 10000"),
        ("runpod.io/required-gpu-memory", "1e9", "from 1 to 2048"),
        ("runpod.io/max-price", "inf", "at most 10000"),
        ("runpod.io/template-id", "a b", "no spaces"),
    ],
)
def test_out_of_range_annotations_name_the_field_and_range_and_create_nothing(
    box: Sandbox,
    annotation: str,
    value: str,
    accepted: str,
) -> None:
    box.add_pod("big", annotations={annotation: value})
    box.tick()
    box.tick()
    assert status_reason(box, "big") == "InvalidAnnotation"
    waiting = (box.pod("big") or {})["status"]["containerStatuses"][0]["state"]["waiting"]
    assert annotation in waiting["message"] and accepted in waiting["message"]
    assert creates(box) == 0


def test_a_malformed_env_entry_affects_only_its_pod(box: Sandbox) -> None:
    box.add_pod("ok-1")
    box.add_pod("broken", env=[{"value": "no name"}])
    box.add_pod("ok-2")
    report = box.tick()
    assert report.ok and report.failed == {}
    assert box.instance_for(box.pod("ok-1") or {}) is not None
    assert box.instance_for(box.pod("ok-2") or {}) is not None
    assert box.instance_for(box.pod("broken") or {}) is None
    assert "InvalidPodSpec" in event_reasons(box, "broken")
    box.tick()
    pod = box.pod("broken") or {}
    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", "InvalidPodSpec")


@pytest.mark.parametrize(
    ("status", "reason", "tried"),
    [
        (401, "RunPodUnauthorized", 1),  # no create of this tick can succeed
        (402, "InsufficientBalance", 1),
        (409, "RunPodRefused", 2),  # this pod's problem: the next pod is tried
    ],
)
def test_a_refusal_stops_the_ticks_creates_only_when_the_table_says_so(
    box: Sandbox, status: int, reason: str, tried: int
) -> None:
    box.add_pod("a")
    box.add_pod("b")
    box.runpod_sim.faults.inject("POST", "/v2/pods", status, count=100)
    box.tick()
    assert creates(box) == tried
    reasons = {row.name: row.reason for row in box.store.load_rows()}
    assert reason in reasons.values()
    assert box.owned_instances() == []
