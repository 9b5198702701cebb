"""PodWatch, the loop's watch thread, against the simulator: it asks for a tick when it
starts and on each change, resumes when the server ends a watch, starts over (and asks for
a tick) when its history is gone, and stops promptly while waiting for events."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from reconciler.adapters.kube.client import KubeClient
from reconciler.runtime.process.watch import PodWatch, node_selector
from reconciler.sim.kube.simulator import KubeSimulator

PodFactory = Callable[..., dict[str, Any]]


def eventually(check: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_changes_resumes_starts_over_and_stops(
    sim: KubeSimulator, kube: KubeClient, make_pod: PodFactory
) -> None:
    pokes: list[float] = []
    watch = PodWatch(
        kube, node_selector("virtual-runpod"), lambda: pokes.append(1), watch_seconds=1
    ).start()
    try:
        eventually(lambda: len(pokes) == 1)  # started: whatever happened before counts
        make_pod("a", node="virtual-runpod")
        eventually(lambda: len(pokes) == 2)
        make_pod("elsewhere", node="real-node")
        time.sleep(1.5)  # the server ended that watch; it was resumed without a poke
        assert len(pokes) == 2
        make_pod("b", node="virtual-runpod")
        eventually(lambda: len(pokes) == 3)

        make_pod("elsewhere-2", node="real-node")
        # As if compacted: the watch's last version is now older than the history.
        sim.store._log_floor = sim.store.resource_version
        eventually(lambda: len(pokes) == 4, seconds=5)  # 410 Gone: started over
        make_pod("c", node="virtual-runpod")
        eventually(lambda: len(pokes) == 5)
    finally:
        started = time.monotonic()
        watch.stop()
        assert time.monotonic() - started < 2
        assert not watch._thread.is_alive()
