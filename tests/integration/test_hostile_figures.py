"""Figures in RunPod's answers that are no figures: a `runtime.cpu.util` of `Infinity`
(what the JSON number 1e400 also parses to) or an uptime past any clock is taken as
missing, and the tick carries on for everyone: pods are still created and mirrored."""

from __future__ import annotations

import json

from reconciler.adapters.runpod.parse import parse_instance, parse_runtime
from reconciler.demo.sandbox import Sandbox


def test_a_tick_with_infinity_in_a_figure_goes_on(box: Sandbox) -> None:
    box.add_pod("first", command=["python", "serve.py"])
    box.tick()
    box.advance(30)
    box.tick()
    first = box.instance_for(box.pod("first") or {})
    assert first is not None and first["status"] == "RUNNING"
    box.runpod_sim.set_instance_fields(
        first["id"],
        {"runtime": {"cpu": {"util": float("inf")}, "uptime": 1e300}, "cost": float("inf")},
    )
    box.add_pod("second", command=["python", "serve.py"])
    report = box.tick()
    assert report.observed and not report.errors, report.errors
    assert box.instance_for(box.pod("second") or {}) is not None
    box.advance(30)
    box.tick()
    assert (box.pod("first") or {})["status"]["phase"] == "Running"


def test_non_finite_and_absurd_json_numbers_read_as_missing() -> None:
    runtime = parse_runtime(
        json.loads('{"uptime": 1e400, "cpu": {"util": 1e400}, "memory": {"util": -1e400}}')
    )
    assert runtime is not None
    assert (runtime.uptime_seconds, runtime.cpu_percent, runtime.memory_percent) == (0, None, None)
    instance = parse_instance(json.loads('{"id": "p1", "cost": NaN, "gpu": {"count": 1e20}}'))
    assert (instance.cost_per_hr, instance.gpu_count) == (0.0, 0)
