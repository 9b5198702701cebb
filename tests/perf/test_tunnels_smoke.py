"""The tunnels' benchmark runs and measures what it says, small: every byte written in
the pod reaches the backend and every byte of the cluster's reaches the pod (it asserts
both counts), the round trips are timed, and the scale part keeps one SSH transport and
every forward per pod."""

from __future__ import annotations

import shutil

import bench_tunnels
import pytest

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")


def test_the_tunnel_benchmark_runs_small(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_tunnels.main(["--megabytes", "4", "--rounds", "50", "--pods", "3"]) == 0
    out = capsys.readouterr().out
    assert "pod -> Service: 4 MB" in out and "cluster -> pod: 4 MB" in out
    assert "ms added" in out
    # 3 Services, each forwarded at its local port and its own: 6 per pod, and the
    # `kubernetes` Service's two.
    assert "3 pods x 3 Services: 24 forwards" in out and "reconciler threads +3" in out
