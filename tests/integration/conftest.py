"""Fixtures: the whole system on loopback (both simulators, real clients, a store)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.core.config import Settings
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.tick import crashpoints

FAST = Settings.of(create_grace_time=30, orphan_grace_time=60, max_pending_time=300)


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(FAST) as sandbox:
        yield sandbox


@pytest.fixture(autouse=True)
def _disarm_crash_points() -> Iterator[None]:
    yield
    crashpoints.arm("")
