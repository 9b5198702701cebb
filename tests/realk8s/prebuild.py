"""The real control plane is built before the session's first test, where a `realk8s`
test is selected: a cold build takes about 15 minutes, and pytest-timeout's per-test
limit (pyproject) counts a fixture's setup, so a build inside the plane fixture failed
the first test by timeout and errored every other from the cached failure.

Why a session hook rather than `timeout_func_only`: the build belongs to no test, and
exempting every fixture of the suite from the limit would let any hanging fixture (a
plane that never becomes ready, a world waiting for its node) hang the run. Here the
limit stays whole and covers no build.

The build's lines go to the terminal as it runs (pytest captures nothing outside a
test): which binary, how long it has taken. Without Go (or kubectl) nothing is built and
the plane fixture says why each test cannot run; where CI is set that fails the test.
"""

from __future__ import annotations

import contextlib
import shutil
import sys

import pytest

from tests.realk8s import build

FAILED = pytest.StashKey[str]()
"""Why the session's build failed: each realk8s test fails with it."""


def wanted(session: pytest.Session) -> bool:
    config = session.config
    if config.option.collectonly or config.option.setupplan:
        return False
    return any(item.get_closest_marker("realk8s") for item in session.items)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not wanted(session) or build.built():
        return
    config = session.config
    missing = [name for name in ("go", "kubectl") if shutil.which(name) is None]
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is None:
            print(line, file=sys.stderr, flush=True)
        else:
            reporter.write_line(line)

    if missing:
        say(f"realk8s: not building the real control plane: no {' or '.join(missing)} on PATH")
        return
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        try:
            build.build(say=say)
        except RuntimeError as error:
            config.stash[FAILED] = str(error)
            say(f"realk8s: the build failed; each realk8s test fails with its error:\n{error}")


def failure(config: pytest.Config) -> str | None:
    return config.stash.get(FAILED, None)
