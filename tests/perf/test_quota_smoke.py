"""Smoke test of the quota benchmark: a burst of 10 pods through a real `reconciler sync`
under the contract's quota, judged by the benchmark's own target check; and its verdict
is its exit code, for every scenario's targets (runs stood in for by their figures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bench_quota
import pytest


def test_a_small_burst_meets_the_burst_targets(tmp_path: Path) -> None:
    found = bench_quota.burst_targets(bench_quota.bench_burst(tmp_path, pods=10))
    assert found and all(met for _name, _measured, met in found), found


def figures(met: bool) -> dict[str, dict[str, Any]]:
    """Each scenario's figures, meeting every target, or each missing one."""
    shares = {"cluster-a/n": 0.34, "cluster-b/n": 0.33, "cluster-c/n": 0.33}
    return {
        "trickle": {
            "pods": 60,
            "creates_ok": 60,
            "throttled": 0,
            "list_share": 0.2,
            "creates_refused": 1,
            "latency_p95_s": 8.0 if met else 12.0,
        },
        "burst": {
            "pods": 1000,
            "quota": bench_quota.DEFAULT_QUOTA,
            "creates": 1000,
            "allowed": 1080,
            "window_share": 1000 / 1080,
            "throttled": 0 if met else 3,
        },
        "clusters": {
            "throttled": 0,
            "shares_while_contended": shares if met else {**shares, "cluster-c/n": 0.1},
            "shares_first_minute": shares,
        },
    }


@pytest.mark.parametrize("met", [True, False])
def test_the_benchmark_exits_1_when_a_target_is_missed(
    met: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = figures(met)
    for name, (_run, check) in list(bench_quota.SCENARIOS.items()):
        monkeypatch.setitem(
            bench_quota.SCENARIOS, name, (lambda _dir, _name=name, **_: ran[_name], check)
        )
    assert bench_quota.main([]) == (0 if met else 1)
    report = capsys.readouterr().out
    assert report.count("[MISSED]") == (0 if met else 3)
    assert report.count("[met]") == (10 if met else 7)
