"""Logs a person reads: one INFO line per decision about a pod (create, adopt, bind, fail,
terminate, finalize) naming the pod, the instance, the reason and the price, the same as
fields in JSON mode; the scheduler library stays quiet below WARNING."""

from __future__ import annotations

import json
import logging

import pytest

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime import process_log

DECISIONS = "reconciler.decisions"


def decisions(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == DECISIONS]


def as_json(record: logging.LogRecord) -> dict[str, object]:
    return dict(json.loads(process_log._JSONFormatter().format(record)))


def test_each_decision_is_one_info_line_with_its_fields(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=DECISIONS)
    box.add_pod("train", namespace="ml")
    box.add_pod("huge", namespace="ml", annotations={"runpod.io/required-gpu-memory": "640"})
    box.add_pod("burst", namespace="ml", bound=False, annotations={"runpod.io/managed": "true"})
    box.kube_sim.make_unschedulable("ml", "burst")
    box.tick()
    by_action = {(as_json(r)["action"], as_json(r)["pod"]): r for r in decisions(caplog)}
    assert set(by_action) == {("create", "train"), ("fail", "huge"), ("bind", "burst")}
    assert all(r.levelno == logging.INFO for r in by_action.values())

    create = as_json(by_action["create", "train"])
    instance = box.instance_for(box.pod("train", "ml") or {})
    assert instance is not None
    assert create["instance"] == instance["id"] and create["namespace"] == "ml"
    assert create["price"] == pytest.approx(float(instance["cost"]))
    assert create["tick"] == box.store.journal()[0].tick_id
    assert (
        f"create ml/train: instance {instance['id']}, ${instance['cost']:.2f}/h"
        in create["message"]
    )
    assert "UnsatisfiableGPURequest" in str(as_json(by_action["fail", "huge"])["reason"])
    assert "unschedulable" in str(as_json(by_action["bind", "burst"])["reason"])

    caplog.clear()
    box.kube_sim.delete_pod("ml", "train", grace_seconds=30)
    box.tick()
    box.tick()
    steps = [
        (as_json(r)["action"], as_json(r).get("instance"))
        for r in decisions(caplog)
        if as_json(r)["pod"] == "train"
    ]
    assert steps == [("terminate", instance["id"]), ("finalize", instance["id"])]


def test_an_adopted_instance_is_logged_as_adopted(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=DECISIONS)
    box.runpod_sim.faults.create_then_fail(1, status=500)
    box.add_pod("serve")
    box.tick()
    box.advance(10)
    box.tick()
    adopted = [as_json(r) for r in decisions(caplog) if as_json(r)["action"] == "adopt"]
    assert len(adopted) == 1 and adopted[0]["pod"] == "serve"
    assert adopted[0]["instance"] == box.owned_instances()[0]["id"]


def test_a_steady_tick_decides_nothing_and_says_nothing(
    box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    box.add_pod("train")
    box.tick()
    box.advance(60)
    box.tick()
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    box.tick()
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []


def test_the_scheduler_library_is_quiet_below_warning() -> None:
    try:
        process_log.configure("DEBUG", "json")
        assert logging.getLogger("apscheduler").getEffectiveLevel() == logging.WARNING
        assert logging.getLogger("apscheduler.scheduler").isEnabledFor(logging.INFO) is False
    finally:
        process_log.configure("INFO", "text")
