"""A tick's data goes when the tick's report does, by reference counting: none of it
waits in a reference cycle for Python's collector, which the engine keeps out of its
ticks (`runtime/tick/collector.py`) and runs only now and then."""

from __future__ import annotations

import gc

from reconciler.demo.sandbox import Sandbox

_TICK_TYPES = {"TickReport", "Observation", "Executor", "Ownership"}


def _cyclic_garbage_of_one_tick(box: Sandbox) -> set[str]:
    # Earlier ticks (of this test or another) froze whatever was alive then: garbage
    # made before this tick is collected first, so that only this tick's is judged.
    gc.unfreeze()
    gc.collect()
    box.tick()  # its report dropped at once, as the loop drops it
    gc.unfreeze()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return {type(found).__name__ for found in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_a_tick_that_creates_runs_and_deletes_leaves_no_cycle(box: Sandbox) -> None:
    box.add_pod("train")
    assert not _cyclic_garbage_of_one_tick(box) & _TICK_TYPES  # creates
    box.advance(30)
    assert not _cyclic_garbage_of_one_tick(box) & _TICK_TYPES  # mirrors Running
    box.advance(30)
    assert not _cyclic_garbage_of_one_tick(box) & _TICK_TYPES  # steady
    box.kube_sim.delete_pod("default", "train")
    assert not _cyclic_garbage_of_one_tick(box) & _TICK_TYPES  # terminates
