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


def test_absurd_but_finite_figures_read_as_missing() -> None:
    """Finite, so `isfinite` lets them by, but no price, port or rank is near them: a cost
    of 1e20 USD/h would make every cap refuse, a rank past any cluster names no member."""
    instance = parse_instance(
        json.loads(
            '{"id": "p1", "cost": 1e20, "cluster": {"id": "c1", "rank": 1000000000000000000},'
            ' "runtime": {"uptime": 5, "ports": [{"ip": "203.0.113.9", "private": 22,'
            ' "public": 1000000000000000000, "type": "tcp"}, {"ip": "203.0.113.9",'
            ' "private": 1e18, "public": 40022, "type": "tcp"}]}}'
        )
    )
    assert instance.cost_per_hr == 0.0
    assert instance.rank is None
    assert instance.runtime is not None
    # the port with an absurd private side maps nothing: dropped
    assert [(p.private_port, p.public_port) for p in instance.runtime.ports] == [(22, None)]
    for rank in ("1e18", '"1000000000000000000"'):
        member = parse_instance(json.loads(f'{{"id": "p2", "cluster": {{"rank": {rank}}}}}'))
        assert member.rank is None, rank
