"""The test tiers. `python -m pytest -m "not slow"` is the edit-test loop: the pure core
and the unit tests (`FAST_DIRS`), in-process, no simulator. Everything else crosses a
boundary (the simulators over HTTP, kubectl, subprocesses, the chaos campaign, the
benchmark) and is marked `slow` here; CI runs both tiers.

Where the CI variable is set, a skipped test fails, whatever skipped it (a `skipif`
mark, `pytest.skip`, `tests/needs.py`): .ci/run installs everything the tests need, and
a skip there would mean CI checked less than it says."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Properties are judged by what they assert, not by how fast an example runs: on a loaded
# two-core machine hypothesis' 200 ms per-example deadline failed a correct property
# (test_equal_mirror_keys_mean_equal_status_and_annotations) as "flaky".
settings.register_profile("reconciler", deadline=None)
settings.load_profile("reconciler")

TESTS = Path(__file__).parent
FAST_DIRS = frozenset({"unit", "planner", "store"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        relative = item.path.relative_to(TESTS)
        if len(relative.parts) > 1 and relative.parts[0] not in FAST_DIRS:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        reason = str(reason).removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"skipped where CI is set ({reason}): in CI this test must run"
