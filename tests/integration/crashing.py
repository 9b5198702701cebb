"""A tick that dies at a crash point, then a new process on the same database: the
crash-safety tests' one move."""

from __future__ import annotations

import pytest

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.tick import crashpoints


def _die() -> None:
    raise crashpoints.SimulatedCrash


def crash_in(box: Sandbox, point: str) -> None:
    """Tick until the first time `point` is reached, die there, and restart."""
    crashpoints.arm(f"{point}:1", die=_die)  # once: the point disarms itself as it fires
    with pytest.raises(crashpoints.SimulatedCrash):
        box.tick()
    box.restart()
