"""Packaging: every package on disk ships in the distribution, migrations included."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_on_disk_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "reconciler").rglob("__init__.py")}
    on_disk |= {"reconciler." + ".".join(p.parent.relative_to(ROOT).parts)
                for p in (ROOT / "migrations").rglob("__init__.py")}
    assert on_disk <= listed, f"not packaged: {sorted(on_disk - listed)}"
