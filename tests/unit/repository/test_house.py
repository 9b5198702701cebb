"""The house stays readable: the size limits docs/development.md gives, checked in CI.

A module that grows past the limit is doing two things; a class with more methods than
the limit is a hub that callers should reach through smaller parts. The simulators stand
in for whole outside worlds and are exempt from the module limit only.

One name, one concept: outside the simulators (which model the outside worlds under
their own names) no class name is defined twice, so a name found in a traceback, a
diff or a doc leads to one class.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "reconciler"
MODULE_LINES = 500
CLASS_METHODS = 30


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _outside_sim(path: Path) -> bool:
    return path.relative_to(PACKAGE).parts[0] != "sim"


@pytest.mark.parametrize(
    "path", [p for p in _modules() if _outside_sim(p)], ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_module_outside_the_simulators_is_longer_than_the_limit(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MODULE_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines"


def _methods(cls: ast.ClassDef) -> int:
    return sum(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in cls.body)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_class_has_more_methods_than_the_limit(path: Path) -> None:
    tree = ast.parse(path.read_text())
    hubs = {
        node.name: _methods(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and _methods(node) > CLASS_METHODS
    }
    assert hubs == {}, f"{path.relative_to(PACKAGE)}: {hubs}"


def test_the_check_sees_a_planted_hub(tmp_path: Path) -> None:
    body = "\n".join(f"    def m{i}(self): ..." for i in range(CLASS_METHODS + 1))
    tree = ast.parse(f"class Hub:\n{body}\n")
    (cls,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    assert _methods(cls) == CLASS_METHODS + 1


def _class_places(modules: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Each class name defined more than once among (name, source) modules, with where."""
    places: dict[str, list[str]] = defaultdict(list)
    for name, source in modules:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                places[node.name].append(f"{name}:{node.lineno}")
    return {cls: where for cls, where in places.items() if len(where) > 1}


def test_no_class_name_is_defined_twice_outside_the_simulators() -> None:
    modules = [(str(p.relative_to(PACKAGE)), p.read_text()) for p in _modules() if _outside_sim(p)]
    assert _class_places(modules) == {}


def test_the_check_sees_a_planted_second_definition() -> None:
    modules = [("a.py", "class Refusal: ..."), ("b.py", "def f():\n    class Refusal: ...")]
    assert _class_places(modules) == {"Refusal": ["a.py:1", "b.py:2"]}
