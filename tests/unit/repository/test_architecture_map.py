"""The architecture page's map (§1, "Layers") matches the package: every folder under
reconciler/ is on it, every folder it names is there, and so is every module at the top
of the package, of core, of core's domains and of runtime and its two rooms. A module or
folder added without a word on the map fails here; the map is where a newcomer starts.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "reconciler"
MAP = ROOT / "docs" / "architecture.md"

# Where each module is named on the map (folders below these are named as folders).
MODULES_NAMED = ("", "core", "runtime", "runtime/tick", "runtime/process")
# Core's domain folders whose modules the map lists one by one.
CORE_DOMAINS = ("plan", "money", "logs", "resources", "pods", "node", "translate", "capacity")


def map_names(text: str) -> set[str]:
    """What §1 names in backticks, whole and split at spaces and commas."""
    section = text[text.index("## 1. Layers") : text.index("## 2. ")]
    names: set[str] = set()
    for quoted in re.findall(r"`([^`]+)`", section):
        names.add(quoted)
        names.update(part for part in re.split(r"[\s,()]+", quoted) if part)
    return names


def folders() -> list[Path]:
    """The package's folders: the layers and their sub-packages."""
    return sorted(
        path.relative_to(PACKAGE)
        for path in PACKAGE.rglob("*")
        if path.is_dir() and path.name != "__pycache__"
    )


def folder_on_map(folder: Path, names: set[str]) -> bool:
    if len(folder.parts) == 1:
        return f"reconciler/{folder}/" in names
    return f"{folder.name}/" in names or f"{folder}/" in names


def modules_to_name() -> list[Path]:
    places = [PACKAGE / place for place in MODULES_NAMED]
    places += [PACKAGE / "core" / domain for domain in CORE_DOMAINS]
    return sorted(
        path.relative_to(PACKAGE)
        for place in places
        for path in place.glob("*.py")
        if path.name != "__init__.py"
    )


def module_on_map(module: Path, names: set[str]) -> bool:
    return bool({module.stem, module.name, str(module), f"reconciler/{module}"} & names)


def missing_from_map(text: str) -> list[str]:
    names = map_names(text)
    missing = [f"folder {f}/" for f in folders() if not folder_on_map(f, names)]
    missing += [f"module {m}" for m in modules_to_name() if not module_on_map(m, names)]
    return missing


def not_in_package(text: str) -> list[str]:
    """Folders the map names that are not there."""
    known = {f"reconciler/{f}/" for f in folders() if len(f.parts) == 1}
    known |= {f"{f.name}/" for f in folders()} | {f"{f}/" for f in folders()}
    named = {n for n in map_names(text) if n.endswith("/") and "." not in n}
    return sorted(named - known)


def test_every_folder_and_module_of_the_package_is_on_the_map() -> None:
    assert missing_from_map(MAP.read_text()) == []


def test_every_folder_the_map_names_is_in_the_package() -> None:
    assert not_in_package(MAP.read_text()) == []


def test_a_module_or_folder_left_off_the_map_is_caught() -> None:
    text = MAP.read_text()
    section = text[text.index("## 1. Layers") : text.index("## 2. ")]
    without_engine = text.replace(section, section.replace("`engine`", "engine"))
    assert "module runtime/tick/engine.py" in missing_from_map(without_engine)
    without_kubelet = text.replace(section, section.replace("kubelet/`", "kubelet`"))
    assert "folder runtime/kubelet/" in missing_from_map(without_kubelet)
    stale = text.replace(section, section + "\n`reconciler/nowhere/`\n")
    assert not_in_package(stale) == ["reconciler/nowhere/"]
