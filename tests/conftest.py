"""The test tiers. `python -m pytest -m "not slow"` is the edit-test loop: the pure core
and the unit tests (`FAST_DIRS`), in-process, no simulator. Everything else crosses a
boundary (the simulators over HTTP, kubectl, subprocesses, the chaos campaign, the
benchmark) and is marked `slow` here; CI runs both tiers."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent
FAST_DIRS = frozenset({"unit", "planner", "store"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        relative = item.path.relative_to(TESTS)
        if len(relative.parts) > 1 and relative.parts[0] not in FAST_DIRS:
            item.add_marker(pytest.mark.slow)
