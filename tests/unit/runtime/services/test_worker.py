"""The tunnels' sync runs beside the ticks: a submit returns at once even while a sync
is stuck (an instance's SSH answering slowly), the ticks that came meanwhile collapse
into one sync of the newest view, and a failing sync does not end the worker."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from reconciler.runtime.services.worker import SyncWorker


def test_a_stuck_sync_holds_up_no_tick_and_the_newest_view_wins() -> None:
    release, started = threading.Event(), threading.Event()
    seen: list[Any] = []
    done = threading.Condition()

    def sync(pods: Sequence[Any], _address_of: Callable[[str], None]) -> None:
        started.set()
        release.wait(30)
        with done:
            seen.append(list(pods))
            done.notify_all()

    worker = SyncWorker(sync)
    worker.submit([{"n": 1}], lambda _uid: None)
    assert started.wait(30)
    worker.submit([{"n": 2}], lambda _uid: None)  # returns while the first is stuck
    worker.submit([{"n": 3}], lambda _uid: None)
    release.set()
    with done:
        assert done.wait_for(lambda: len(seen) == 2, 30)
    assert seen == [[{"n": 1}], [{"n": 3}]]
    worker.close()


def test_a_failing_sync_does_not_end_the_worker() -> None:
    calls: list[int] = []
    done = threading.Condition()

    def sync(pods: Sequence[Any], _address_of: Callable[[str], None]) -> None:
        with done:
            calls.append(len(pods))
            done.notify_all()
        if len(calls) == 1:
            raise RuntimeError("boom")

    worker = SyncWorker(sync)
    worker.submit([1], lambda _uid: None)
    with done:
        assert done.wait_for(lambda: len(calls) == 1, 30)
    worker.submit([1, 2], lambda _uid: None)
    with done:
        assert done.wait_for(lambda: len(calls) == 2, 30)
    worker.close()
