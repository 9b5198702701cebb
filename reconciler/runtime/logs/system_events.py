"""RunPod's `system` log lines (image pull, start-up, stop, errors) as Events on the pod.

Each line becomes an Event `RunPodSystem` stamped with the line's own time; lines with
the same text aggregate into one Event with a count, as a kubelet's event recorder
does. A line is never counted twice, however often it is read: this process remembers
the last line it recorded per pod (RunPod's event ids are timestamps, so lines come in
order), and the Event's last time tells any process, after a restart or in the next
CronJob run, whether a line is counted in it already (`KubeClient.events.record`).

When the lines are read, and what that costs in RunPod requests:
- **While an instance starts** (`StartupLines`, from the pod's create until its
  container runs), only while RunPod's quota is ample (`pacing.ample`): otherwise the
  lines wait for the instance's end, as below.
  - The Deployment holds one stream (`source=system`) per starting pod open in a
    background thread, on its own client: 1 request per starting pod, plus 1 per resume
    after a break and 1 per minute without a line (the stream is opened again in case
    it died unnoticed); at most MAX_STREAMS at once. A pod that runs or ends lets its
    stream go at its next line or within that minute, with no request more.
  - `sync --once` (CronJob mode) reads each starting pod's last lines once per run, at
    most MAX_READS_PER_TICK of them, each read ending at the end of RunPod's backfill:
    1 request per starting pod per run.
- **When the instance ends**, with its last lines (`PodLogs.keep`): the request that
  keeps the log anyway; the lines not recorded yet are recorded then.
In the Kubernetes API a new line costs one POST; a line read again costs nothing in
this process, and a GET in another one (a repeat of a line with the same text within the
same second counts once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.logstream import LogEvent, LogRead, LogStreamBroken, read_log
from reconciler.core.actions import PodRef
from reconciler.core.capacity.starts import FailedStart, first_failure
from reconciler.core.logs.starting import Starting
from reconciler.core.reasons import Notice

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024
"""An Event's message is cut to this many characters."""
STARTUP_TAIL = 20
"""System lines a first read of a starting instance backfills."""
MAX_STREAMS = 16
"""Starting pods whose stream the Deployment holds open at once."""
MAX_READS_PER_TICK = 4
"""Starting pods whose lines one `sync --once` run reads."""
FOLLOW_IDLE_SECONDS = 60.0
"""A stream without a line this long is opened again (a request), or let go."""
READ_IDLE_SECONDS = 0.5
"""`sync --once`: the silence that ends a read of an instance that prints nothing."""


class SystemEvents:
    """Records system lines as Events on their pod, each line once."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._last: dict[str, tuple[datetime, str]] = {}
        self._lock = threading.Lock()

    def record(self, pod: PodRef, events: Iterable[LogEvent]) -> int:
        """Record the system lines among `events` not recorded yet, in order; how many
        were recorded. Raises KubeError (the lines before it are recorded)."""
        recorded = 0
        for event in events:
            if event.source != "system" or not self._is_new(pod.uid, event):
                continue
            self.kube.events.record(
                _involved(pod),
                Notice.RUNPOD_SYSTEM.value,
                event.line[:MAX_MESSAGE],
                occurred_at=event.ts,
            )
            with self._lock:
                self._last[pod.uid] = (event.ts, event.id)
            recorded += 1
        return recorded

    def last_id(self, pod_uid: str) -> str | None:
        """The event id of the last line recorded for the pod here: a read resumes after it."""
        with self._lock:
            last = self._last.get(pod_uid)
        return last[1] if last else None

    def forget_others(self, pod_uids: Iterable[str]) -> None:
        """Keep memory only of these pods (the rest are gone)."""
        keep = set(pod_uids)
        with self._lock:
            for uid in [uid for uid in self._last if uid not in keep]:
                del self._last[uid]

    def _is_new(self, pod_uid: str, event: LogEvent) -> bool:
        with self._lock:
            last = self._last.get(pod_uid)
        return last is None or (event.ts, event.id) > last


@dataclass
class _Stream:
    starting: Starting
    stop: threading.Event = field(default_factory=threading.Event)


class StartupLines:
    """Shows starting instances' system lines as Events while they start (see above).

    `open_client` gives each background stream its own RunPod client (the Deployment);
    without it the lines are read in the tick, with the tick's client (`sync --once`).
    """

    def __init__(
        self,
        events: SystemEvents,
        open_client: Callable[[], RunPodClient] | None = None,
        *,
        max_streams: int = MAX_STREAMS,
        follow_idle: float = FOLLOW_IDLE_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.events, self.open_client = events, open_client
        self.max_streams, self.follow_idle, self.sleep = max_streams, follow_idle, sleep
        self._streams: dict[str, _Stream] = {}
        self._tried: set[str] = set()
        """Instances a stream was opened for: never a second one, whatever became of it."""
        self._failed: dict[str, FailedStart] = {}
        """Instances starting now whose lines said their start cannot succeed."""
        self._reads: dict[str, int] = {}
        """`sync --once`: when (in reads) each starting instance's lines were last read."""
        self._runs = 0
        self._lock = threading.Lock()

    def failed_starts(self) -> dict[str, FailedStart]:
        """By instance id: the starts RunPod's lines said cannot succeed, for the plan."""
        with self._lock:
            return dict(self._failed)

    def _judge(self, instance_id: str, events: Sequence[LogEvent]) -> None:
        found = first_failure(e.line for e in events if e.source == "system")
        if found is not None:
            with self._lock:
                self._failed.setdefault(instance_id, found)

    def update(self, runpod: RunPodClient, now_starting: Sequence[Starting]) -> None:
        """After a tick: the pods whose instance starts now, oldest first."""
        if self.open_client is None:
            self._read_now(runpod, now_starting)
        else:
            self._hold_streams(runpod, now_starting)

    def stop(self) -> None:
        """Let every stream go (shutting down)."""
        self._hold_streams(None, ())

    @property
    def open_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    # --- the Deployment: a stream per starting pod -------------------------------------

    def _hold_streams(self, runpod: RunPodClient | None, now_starting: Sequence[Starting]) -> None:
        wanted = {s.instance_id for s in now_starting}
        with self._lock:
            for instance_id in [i for i in self._streams if i not in wanted]:
                self._streams.pop(instance_id).stop.set()
            self._tried &= wanted
            self._failed = {i: f for i, f in self._failed.items() if i in wanted}
            for item in now_starting:
                if item.instance_id in self._tried:
                    continue
                if runpod is None or len(self._streams) >= self.max_streams:
                    break
                if not runpod.quota_ample():
                    log.debug("RunPod's quota is not ample: start-up lines wait")
                    break
                stream = _Stream(item)
                self._streams[item.instance_id] = stream
                self._tried.add(item.instance_id)
                threading.Thread(
                    target=self._follow,
                    args=(stream,),
                    name=f"system-lines-{item.instance_id}",
                    daemon=True,
                ).start()

    def _follow(self, stream: _Stream) -> None:
        pod, instance_id = stream.starting.pod, stream.starting.instance_id
        assert self.open_client is not None
        try:
            with self.open_client() as runpod:
                after = self.events.last_id(pod.uid)
                read = LogRead(
                    source="system", tail=None if after else STARTUP_TAIL, after=after, follow=True
                )
                events = self._read(runpod, instance_id, read, stream.stop)
                try:
                    for event in events:
                        if stream.stop.is_set():
                            break
                        self._judge(instance_id, [event])
                        self.events.record(pod, [event])
                finally:
                    events.close()
        except runpod_errors.RunPodNotFound:
            log.debug("instance %s is gone: no more start-up lines", instance_id)
        except (runpod_errors.RunPodError, LogStreamBroken, kube_errors.KubeError) as exc:
            log.info("start-up lines of %s (%s) stopped: %s", pod, instance_id, exc)
        except Exception:  # a background thread must never die without a word
            log.exception("start-up lines of %s (%s) stopped", pod, instance_id)
        finally:
            with self._lock:
                if self._streams.get(instance_id) is stream:
                    del self._streams[instance_id]

    def _read(
        self,
        runpod: RunPodClient,
        instance_id: str,
        read: LogRead,
        stop: threading.Event,
        max_resumes: int = 5,
    ) -> Generator[LogEvent, None, bool]:
        return read_log(
            runpod.instances.log_events,
            instance_id,
            read,
            backfill_idle_seconds=READ_IDLE_SECONDS,
            follow_idle_seconds=self.follow_idle,
            max_resumes=max_resumes,
            sleep=self.sleep,
            should_stop=stop.is_set,
        )

    # --- `sync --once`: a read per starting pod in the tick ------------------------------

    def _read_now(self, runpod: RunPodClient, now_starting: Sequence[Starting]) -> None:
        wanted = {s.instance_id for s in now_starting}
        with self._lock:
            self._failed = {i: f for i, f in self._failed.items() if i in wanted}
        self._reads = {i: n for i, n in self._reads.items() if i in wanted}
        # The least lately read first, so that more starting pods than one run reads
        # take turns: a start that failed is seen within a few runs, whatever its age.
        order = sorted(now_starting, key=lambda s: self._reads.get(s.instance_id, -1))
        for item in order[:MAX_READS_PER_TICK]:
            self._reads[item.instance_id] = self._runs
            self._runs += 1
            if not runpod.quota_ample():
                log.debug("RunPod's quota is not ample: start-up lines wait")
                return
            read = LogRead(source="system", tail=STARTUP_TAIL)
            # Not resumed after a break: the next run reads again.
            events = self._read(runpod, item.instance_id, read, threading.Event(), max_resumes=0)
            try:
                lines = list(events)
                self._judge(item.instance_id, lines)
                self.events.record(item.pod, lines)
            except (runpod_errors.RunPodError, LogStreamBroken, kube_errors.KubeError) as exc:
                log.info("could not show the start-up lines of %s: %s", item.pod, exc)


def _involved(pod: PodRef) -> dict[str, object]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid},
    }
