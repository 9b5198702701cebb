"""The engine's tick runs without Python's cycle collector and gives it back afterwards,
also when the tick raises; a collector someone else turned off stays off. What a tick
leaves alive is frozen until the next tick thaws it, and cycles made in ticks are still
collected, by the full pass every `FULL_EVERY` ticks."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from reconciler.runtime.tick.collector import CollectorPause


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if was else gc.disable)()


def test_the_collector_is_off_in_the_tick_and_on_after_it() -> None:
    gc.enable()
    with CollectorPause()():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_tick_that_raises_gives_the_collector_back() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), CollectorPause()():
        raise RuntimeError("tick failed")
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off() -> None:
    gc.disable()
    with CollectorPause()():
        assert not gc.isenabled()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_what_a_tick_leaves_alive_is_frozen_until_the_next_tick() -> None:
    gc.enable()
    pause = CollectorPause()
    with pause():
        kept = [{"pod": n} for n in range(1000)]
    assert gc.get_freeze_count() >= len(kept)
    with pause():
        assert gc.get_freeze_count() == 0


class _Node:
    def __init__(self) -> None:
        self.me = self


def test_a_cycle_made_in_a_tick_is_collected_by_the_full_pass() -> None:
    gc.enable()
    pause = CollectorPause()
    with pause():
        garbage = weakref.ref(_Node())
    assert garbage() is not None  # frozen: no pass sees it
    for _ in range(CollectorPause.FULL_EVERY - 1):
        with pause():
            pass
    assert garbage() is None
