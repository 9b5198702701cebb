"""Pod watches that ask for an early tick when something a tick would act on changed.

Two watches run in the loop mode: the pods bound to the virtual node, and the unscheduled
Pending pods (offload candidates). They only say "look now": the tick still lists
everything itself, so a missed or duplicated event costs at most a tick, never a wrong
decision, and the periodic tick stays the safety net.

A watch starts at the resourceVersion of a one-item list and resumes from the last event
it saw when the server ends it. When the server no longer has that history (410 Gone)
it starts over from a fresh list; after a broken connection it waits (exponential
backoff) and resumes. Whenever it starts over it asks for a tick, since changes may have
been missed meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
from collections.abc import Callable

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.errors import KubeError, KubeGone
from reconciler.adapters.kube.pods import node_pods_selector
from reconciler.adapters.kube.stream import WatchStream
from reconciler.core.domain import KubeObject
from reconciler.core.money.charges import SPEND_ANNOTATION
from reconciler.core.translate.annotations import WRITTEN_ANNOTATIONS

log = logging.getLogger(__name__)

# Seconds the server keeps one watch open; client-go picks 5 to 10 minutes.
WATCH_SECONDS = 300
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 30.0
# Metadata that changes with every write, whatever was written.
_VOLATILE_METADATA = ("resourceVersion", "managedFields", "generation")
# A pending pod may be offloaded when it, or its Job, asks for it (docs/architecture.md §2).
_OFFLOAD_ANNOTATIONS = ("runpod.io/managed", "runpod.io/offload")
# The annotations the reconciler writes on pods (what it placed, what it was billed).
_OUR_ANNOTATIONS = WRITTEN_ANNOTATIONS | {SPEND_ANNOTATION}


def node_selector(node_name: str) -> str:
    return node_pods_selector(node_name)


# Unscheduled Pending pods: the same selector as KubeClient.pods.list_pending.
PENDING_SELECTOR = "spec.nodeName=,status.phase=Pending"


class ChangeFilter:
    """Drops events that change nothing but a pod's status (except its scheduling) and
    the annotations the reconciler writes.

    The reconciler writes the status of the pods on its node (it is their kubelet): each
    patch echoes back as a MODIFIED event, and a tick for it would find nothing to do.
    The PodScheduled condition counts, though: the scheduler giving up on a pod (reason
    Unschedulable) is what makes it an offload candidate. Remembers a digest per pod.
    """

    def __init__(self, wanted: Callable[[KubeObject], bool] = lambda _pod: True) -> None:
        self._wanted = wanted
        self._digests: dict[str, str] = {}

    def matters(self, kind: str, pod: KubeObject) -> bool:
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        if kind == "DELETED":
            return self._digests.pop(uid, None) is not None or self._wanted(pod)
        if kind not in ("ADDED", "MODIFIED") or not self._wanted(pod):
            return False
        digest = _digest(pod)
        changed = self._digests.get(uid) != digest
        self._digests[uid] = digest
        return changed


def may_be_offloaded(pod: KubeObject) -> bool:
    """A pending pod that asks to be offloaded, or a Job's pod (the Job may ask)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return any(key in annotations for key in _OFFLOAD_ANNOTATIONS) or any(
        ref.get("kind") == "Job" for ref in meta.get("ownerReferences") or []
    )


def backoff_seconds(failures: int, rand: Callable[[], float] = random.random) -> float:
    """1, 2, 4 … 30 s, with jitter so that replicas do not reconnect in lockstep."""
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, failures - 1))
    return ceiling * (0.5 + rand() / 2)


def _digest(pod: KubeObject) -> str:
    meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    # Our own annotations echo back like our status patches: no reason to look again.
    meta["annotations"] = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in _OUR_ANNOTATIONS
    }
    spec = pod.get("spec") or {}
    # Not PodScheduled=True: that is what we (the kubelet of the pods bound to our node)
    # write in a new pod's first status; a bound pod's spec says it was scheduled anyway.
    scheduled = [
        (c.get("status"), c.get("reason"))
        for c in (pod.get("status") or {}).get("conditions") or []
        if c.get("type") == "PodScheduled" and c.get("status") != "True"
    ]
    text = json.dumps([meta, spec, scheduled], sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class PodWatch:
    """One watch in its own thread, calling `changed` for every event that matters."""

    def __init__(
        self,
        kube: KubeClient,
        field_selector: str,
        changed: Callable[[], None],
        change_filter: ChangeFilter | None = None,
        name: str = "watch",
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self.kube, self.field_selector, self.changed = kube, field_selector, changed
        self.filter = change_filter or ChangeFilter()
        self.watch_seconds = watch_seconds
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._stream_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> PodWatch:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._stream_lock:
            if self._stream is not None:
                self._stream.close()
        self._thread.join(timeout)

    def _run(self) -> None:
        version: str | None = None
        failures = 0
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self.kube.pods.resource_version(self.field_selector)
                    self.changed()  # whatever happened while nobody watched
                version = self._follow(version)
                failures = 0
            except KubeGone:
                log.info("watch %s: history expired; starting over", self.field_selector)
                version = None
            except KubeError as exc:
                if self._stop.is_set():
                    break
                failures += 1
                delay = backoff_seconds(failures)
                log.warning(
                    "watch %s failed (%d in a row): %s; will retry in %.1f s",
                    self.field_selector,
                    failures,
                    exc,
                    delay,
                )
                self._stop.wait(delay)

    def _follow(self, version: str) -> str:
        """Read one watch to its end; the resourceVersion to resume from."""
        stream = self.kube.pods.watch(self.field_selector, version, self.watch_seconds)
        with self._stream_lock:
            self._stream = stream
        if self._stop.is_set():  # stop() ran before the stream was there to close
            stream.close()
        try:
            for kind, pod in stream.events():
                version = str((pod.get("metadata") or {}).get("resourceVersion") or version)
                if self.filter.matters(kind, pod):
                    self.changed()
        finally:
            with self._stream_lock:
                self._stream = None
            stream.close()
        return version
