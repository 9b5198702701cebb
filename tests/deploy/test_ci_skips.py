"""Under CI no test skips: a test that would skip for want of a program fails instead,
whatever skipped it (here a `skipif` mark, with kubectl off PATH)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/kube/test_kubectl.py::test_kubectl_get_create_and_delete"


def run(ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's programs, no kubectl
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_skip_fails_where_ci_is_set() -> None:
    done = run(ci=True)
    assert done.returncode == 1, done.stdout
    assert "1 error" in done.stdout or "1 failed" in done.stdout  # a skip in setup: an error
    assert "skipped where CI is set (kubectl is not installed)" in done.stdout


def test_without_ci_it_skips_saying_why() -> None:
    done = run(ci=False)
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout and "kubectl is not installed" in done.stdout
