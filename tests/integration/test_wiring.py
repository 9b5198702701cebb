"""How `wiring.compose` puts a reconciler together: the ticks of `RunMode.ONCE` keep the
node alive, those of `RunMode.LOOP` leave it to the heartbeat's own schedule, and an
engine composed with the writer lock refuses to tick without holding it."""

from __future__ import annotations

import pytest

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.process.wiring import LockKeeper, LockNotHeld, RunMode, compose, holding


def _lease(box: Sandbox) -> object:
    return box.kube_sim.get("leases", "kube-node-lease", box.settings.node.name)


def test_a_once_tick_registers_the_node_and_renews_its_lease(box: Sandbox) -> None:
    engine, _ = compose(box.settings, box.runpod, box.kube, box.store, box.clock.now, RunMode.ONCE)
    assert engine.tick().ok
    assert box.kube_sim.get("nodes", None, box.settings.node.name) is not None
    assert _lease(box) is not None


def test_a_loop_tick_leaves_the_node_to_the_heartbeat(box: Sandbox) -> None:
    engine, heartbeat = compose(
        box.settings, box.runpod, box.kube, box.store, box.clock.now, RunMode.LOOP
    )
    assert engine.tick().ok
    assert box.kube_sim.get("nodes", None, box.settings.node.name) is None
    assert _lease(box) is None
    heartbeat.beat()
    assert box.kube_sim.get("nodes", None, box.settings.node.name) is not None
    assert _lease(box) is not None


def test_an_engine_with_the_writer_lock_ticks_only_while_holding_it(box: Sandbox) -> None:
    lock = LockKeeper(box.store, box.clock.now)
    engine, _ = compose(
        box.settings, box.runpod, box.kube, box.store, box.clock.now, RunMode.ONCE, lock
    )
    with pytest.raises(LockNotHeld):
        engine.tick()
    with holding(lock):
        assert engine.tick().ok
    with pytest.raises(LockNotHeld):
        engine.tick()
