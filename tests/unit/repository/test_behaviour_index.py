"""The architecture page's behaviour index (§8, "Where each behaviour lives") names only
what exists: every dotted path in it imports as a module, or as a module and then
attributes (a function, a class, a method). A function renamed or moved without the
index following fails here, so the index stays the one place a reader can trust to find
where a behaviour is carried.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "architecture.md"
HEADING = "## 8. Where each behaviour lives"

_PATH = re.compile(r"`(reconciler(?:\.\w+)+)`")


def behaviours(text: str) -> dict[str, list[str]]:
    """Each behaviour (its bold name) with the dotted paths its list item names, in order."""
    section = text[text.index(HEADING) :]
    following = section.find("\n## ", len(HEADING))
    section = section if following == -1 else section[:following]
    found: dict[str, list[str]] = {}
    for item in re.split(r"\n(?=- \*\*)", section)[1:]:
        name = re.match(r"- \*\*(.+?)\*\*", item)
        assert name is not None, item[:60]
        found[name.group(1)] = _PATH.findall(item)
    return found


def resolves(path: str) -> bool:
    """Whether `path` is a module, or a module's attribute chain."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_path_the_index_names_exists() -> None:
    missing = [
        f"{behaviour}: {path}"
        for behaviour, paths in behaviours(PAGE.read_text()).items()
        for path in paths
        if not resolves(path)
    ]
    assert missing == []


def test_the_index_lists_behaviours_each_with_its_functions() -> None:
    found = behaviours(PAGE.read_text())
    assert 15 <= len(found) <= 30
    assert [b for b, paths in found.items() if len(paths) < 2] == []
    assert "A network volume is released" in found


def test_a_renamed_function_or_module_is_caught() -> None:
    assert resolves("reconciler.core.resources.network_volumes.plan_volumes")
    assert resolves("reconciler.core.actions.Terminate.keeps_log")
    assert resolves("reconciler.core.translate")
    assert not resolves("reconciler.core.resources.network_volumes.plan_volume")
    assert not resolves("reconciler.core.actions.Terminate.keeps_logs")
    assert not resolves("reconciler.core.resources.network_volume.plan_volumes")
