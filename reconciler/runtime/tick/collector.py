"""Python's cycle collector kept out of the ticks.

A tick decodes both lists (at 10 000 pods about a million dicts and lists), keeps them
while it plans and applies, and drops them at its end, where reference counting frees
them. While they live, each of them triggers and lengthens the collector's passes over
the heap, for no garbage found: a third of a steady tick's CPU at that size. So the
collector is off during a tick, and what the tick leaves alive when it ends (its report
holds the observation until the caller drops it) is frozen, out of the collector's
sight: the first pass after the tick would otherwise go over all of it once more, a
fifth of a steady tick.

Frozen objects are never collected, so the next tick thaws them first, and every
`FULL_EVERY`-th tick starts with a full pass: cycles made during ticks (a traceback's
frames, say) are found then, when the last tick's data is gone and the pass is short.
The tick's data itself makes no cycle (`tests/integration/test_tick_garbage.py`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


class CollectorPause:
    FULL_EVERY = 20
    """Ticks between full passes: five minutes at the loop's default 15 s."""

    def __init__(self) -> None:
        self._ticks = 0

    @contextmanager
    def __call__(self) -> Iterator[None]:
        """Around a tick. Left alone when something else turned the collector off."""
        if not gc.isenabled():
            yield
            return
        gc.disable()
        gc.unfreeze()
        self._ticks += 1
        if self._ticks % self.FULL_EVERY == 0:
            gc.collect()
        try:
            yield
        finally:
            gc.freeze()
            gc.enable()
