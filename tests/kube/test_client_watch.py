"""KubeClient's pod watch over HTTP against the simulator: it starts where a one-item list
says the pods are, streams the changes a field selector lets through, raises KubeGone
for history the server no longer has, and a close from another thread ends a blocked read.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.errors import KubeGone, KubeTransportError
from reconciler.sim.kube.simulator import KubeSimulator

PodFactory = Callable[..., dict[str, Any]]

NODE = "spec.nodeName=virtual-runpod"


def test_watch_from_the_listed_version_sees_only_later_changes_through_the_selector(
    sim: KubeSimulator,
    kube: KubeClient,
    make_pod: PodFactory,
) -> None:
    make_pod("before", node="virtual-runpod")
    version = kube.pods.resource_version(NODE)
    make_pod("elsewhere", node="real-node")
    make_pod("after", node="virtual-runpod")
    sim.delete_pod("default", "after")

    stream = kube.pods.watch(NODE, version, timeout_seconds=1)
    seen = [(kind, pod["metadata"]["name"]) for kind, pod in stream.events()]

    # A bound pod's delete is graceful: it gets a deletionTimestamp and waits for its
    # kubelet (us) to finish it.
    assert seen == [("ADDED", "after"), ("MODIFIED", "after")]


def test_a_version_older_than_the_history_is_gone(
    sim: KubeSimulator, kube: KubeClient, make_pod: PodFactory
) -> None:
    make_pod("p", node="virtual-runpod")
    # As if the history were compacted (20 000 writes would take a while).
    sim.store._log_floor = sim.store.resource_version
    with pytest.raises(KubeGone):
        list(kube.pods.watch(NODE, "1", timeout_seconds=1).events())


def test_close_from_another_thread_ends_a_read_waiting_for_events(kube: KubeClient) -> None:
    stream = kube.pods.watch(NODE, kube.pods.resource_version(NODE), timeout_seconds=60)
    ended = threading.Event()

    def consume() -> None:
        with contextlib.suppress(KubeTransportError):  # a broken-off read is one way to end
            list(stream.events())
        ended.set()

    threading.Thread(target=consume, daemon=True).start()
    time.sleep(0.2)  # let the reader block in its read
    started = time.monotonic()
    stream.close()
    assert ended.wait(5)
    assert time.monotonic() - started < 5
