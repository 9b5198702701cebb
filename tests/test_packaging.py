"""Packaging: every package on disk ships in the distribution, migrations included, and
the build runs without deprecation warnings."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_on_disk_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "reconciler").rglob("__init__.py")
    }
    on_disk |= {
        "reconciler." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "migrations").rglob("__init__.py")
    }
    assert on_disk <= listed, f"not packaged: {sorted(on_disk - listed)}"


@pytest.mark.slow
def test_the_build_prints_no_deprecation_warning(tmp_path: Path) -> None:
    """setuptools warns about settings it will stop accepting (e.g. a license table)."""
    # A copy, so the build's own build/ and egg-info folders stay out of the checkout.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("reconciler", "migrations"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--verbose",
            "--wheel-dir",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "DeprecationWarning" not in output, output[output.find("DeprecationWarning") - 500 :]
    assert list(tmp_path.glob("runpod_reconciler-*.whl"))
