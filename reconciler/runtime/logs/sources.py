"""Where a pod's log comes from: its RunPod instance while it lives, the store after.

Reading a live instance costs RunPod requests: one for the backfill, one more to follow (`-f`), and
one per resume after a broken stream. A log kept in the store costs none. When a pod's instance
ends while the pod object stays (a batch pod finished, a pod failed), `keep()` saves the last lines
(one request, or none when the tick read them for a batch pod's exit code: `read_exits`), so
`kubectl logs` still works after the instance is gone, until the pod object, and with it its row,
is deleted; the same read shows RunPod's system lines not yet shown as Events (`system_events`).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.logstream import (
    MAX_TAIL,
    LogEvent,
    LogRead,
    LogStreamBroken,
    LogStreamOpener,
    exit_code_from,
    exit_log,
    read_log,
)
from reconciler.adapters.store.repository import Store
from reconciler.core.actions import PodRef
from reconciler.core.contract import exit_code_marker, exit_nonce
from reconciler.core.domain import ExitLog, KubeObject
from reconciler.core.kubenames import name_problem
from reconciler.core.logs.kubectl_logs import (
    PREVIOUS_UNSUPPORTED,
    LogLine,
    LogOptions,
    backfill_lines,
    last_lines,
    users_lines,
)
from reconciler.core.logs.starting import waiting_message
from reconciler.core.mapping import MappingState
from reconciler.core.pods import podinfo
from reconciler.core.resources import clusters
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.errors import TranslationError
from reconciler.runtime.logs.follows import LogGate, LogsRefused, SharedFollows
from reconciler.runtime.logs.system_events import SystemEvents

log = logging.getLogger(__name__)

# Lines asked for beyond the tail: the batch wrapper's own lines end a finished log and
# are left out, so a tail of N needs a few more to show N of the user's.
WRAPPER_SLACK = 4
SYSTEM_LINES_KEPT = 10
"""The last system lines of an ended instance that become Events on its pod (those not
recorded while it started, `system_events`)."""
BACKFILL_IDLE_SECONDS = 1.0
"""A read without follow ends at the end of RunPod's backfill (`read_log`); only for an
instance that prints nothing more does this much silence end it instead."""
FOLLOW_IDLE_SECONDS = 60.0
"""A followed stream silent this long is opened again (one request), in case it died
unnoticed; the reader is asked meanwhile whether it is still there."""


# Row states whose instance may still have a log to read.
_LIVE = (MappingState.RUNNING, MappingState.TERMINATING)


class LogError(Exception):
    """A request we cannot serve: HTTP status and a sentence for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class KeepLimits:
    lines: int = 1000
    bytes: int = 1 << 20


class PodLogs:
    def __init__(
        self,
        node_name: str,
        runpod: RunPodClient,
        kube: KubeClient,
        store: Store,
        clock: Callable[[], datetime],
        *,
        limits: KeepLimits = KeepLimits(),
        sleep: Callable[[float], None] = time.sleep,
        backfill_idle: float = BACKFILL_IDLE_SECONDS,
        follow_idle: float = FOLLOW_IDLE_SECONDS,
        system_events: SystemEvents | None = None,
        gate: LogGate | None = None,
    ) -> None:
        """`system_events` records an ended instance's system lines (`keep`). With a
        `gate` (the kubelet endpoint's), reads keep to their share of RunPod's quota and
        the followers of an instance share one stream (`follows`)."""
        self.node_name, self.runpod, self.kube, self.store = node_name, runpod, kube, store
        self.clock, self.limits, self.sleep = clock, limits, sleep
        self.backfill_idle, self.follow_idle = backfill_idle, follow_idle
        self.system_events = system_events
        self.gate = gate
        self.follows = (
            None
            if gate is None
            else SharedFollows(
                lambda i, read, stop: self._read(
                    i, read, stop, gate.opener(runpod.instances.log_events, False, stop)
                ),
                lambda i, read, stop: self._read(
                    i, read, stop, gate.opener(runpod.instances.log_events, True, stop)
                ),
                clock,
            )
        )
        self._read_at_exit: dict[str, list[LogEvent]] = {}
        """This tick's reads of stopped instances, for `keep` to save without reading again."""

    # --- keeping the last lines when an instance ends ------------------------------

    def read_exits(self, stopped: Iterable[tuple[str, str]]) -> dict[str, ExitLog]:
        """The exit codes of stopped batch instances (instance id, the nonce of its
        wrapper's marker), one request each. The same read, long enough for what `keep`
        saves, serves `keep` when the instance is terminated this tick: a finished batch
        pod costs one log read, not two."""
        self._read_at_exit = {}
        found: dict[str, ExitLog] = {}
        for instance_id, nonce in stopped:
            try:
                events = self.runpod.instances.read_ended_log(instance_id, tail=self._kept_tail())
            except runpod_errors.RunPodError as exc:
                log.warning("could not read the exit code of %s: %s", instance_id, exc)
                continue
            self._read_at_exit[instance_id] = events
            found[instance_id] = exit_log(events, nonce)
        return found

    def read_results(self, due: Mapping[str, tuple[str, str]]) -> dict[str, int | None]:
        """Rank 0's exit code of each gang due a read (`core.plan.gang_end.due_reads`:
        by gang key, the member's id and its marker's nonce), one request each: the last
        container line, where a member's wrapper keeps its marker (None: not there yet).
        A gang whose read failed is left out: its end is unknown, not "still running"."""
        found: dict[str, int | None] = {}
        for gang, (instance_id, nonce) in due.items():
            events = read_log(
                self.runpod.instances.log_events,
                instance_id,
                LogRead(source="container", tail=1),
                backfill_idle_seconds=self.backfill_idle,
                follow_idle_seconds=self.backfill_idle,
                max_resumes=0,
                sleep=self.sleep,
            )
            try:
                lines = [event.line for event in events]
            except (runpod_errors.RunPodError, LogStreamBroken) as exc:
                log.warning("could not read the result of rank 0 (%s): %s", instance_id, exc)
                continue
            found[gang] = exit_code_from(lines, nonce)
        return found

    def keep(self, pod: PodRef, instance_id: str, job_uid: str | None = None) -> None:
        """Save the instance's last container lines for the pod (once), in one request
        for both sources (none when this tick read them for the exit code); its last
        system lines (start-up, stop, errors) not recorded yet become the pod's Events.
        A gang's pod (`job_uid`: its Job) keeps its cluster member's before the cluster
        is deleted. Never raises for RunPod."""
        events: list[LogEvent] | None = self._read_at_exit.pop(instance_id, None)
        if self.store.saved_logs.has(pod.uid):
            return
        try:
            if events is None:
                events, _ = _drain(
                    self._read(instance_id, LogRead(source=None, tail=self._kept_tail()))
                )
        except (runpod_errors.RunPodError, LogStreamBroken) as exc:
            log.warning("could not keep the log of instance %s: %s", instance_id, exc)
            return
        nonce = exit_nonce(pod.uid) if job_uid is None else clusters.gang_nonce(job_uid)
        container = users_lines(
            (LogLine(e.ts, e.line) for e in events if e.source != "system"), nonce
        )
        lines, truncated = self._within_limits([(line.ts, line.line) for line in container])
        if job_uid is None:
            self.store.saved_logs.save(pod.uid, instance_id, lines, truncated, self.clock())
        else:
            kept = (lines, truncated, self.clock())
            self.store.saved_logs.save_member(pod.uid, job_uid, instance_id, *kept)
        if self.system_events is not None:
            system = [e for e in events if e.source == "system"]
            self.system_events.record(pod, system[-SYSTEM_LINES_KEPT:])

    def _kept_tail(self) -> int:
        return min(self.limits.lines + SYSTEM_LINES_KEPT, MAX_TAIL)

    def _within_limits(
        self, lines: list[tuple[datetime, str]]
    ) -> tuple[list[tuple[datetime, str]], bool]:
        kept = lines[-self.limits.lines :] if self.limits.lines else []
        size, start = 0, len(kept)
        while start > 0 and size + len(kept[start - 1][1].encode()) + 1 <= self.limits.bytes:
            start -= 1
            size += len(kept[start][1].encode()) + 1
        return kept[start:], start > 0 or len(kept) < len(lines)

    # --- serving a log -----------------------------------------------------------------

    def lines(
        self,
        namespace: str,
        name: str,
        container: str,
        options: LogOptions,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[LogLine]:
        """The pod's lines as asked; raises LogError before the first line if it cannot."""
        pod, container = self._check(namespace, name, container, options)
        pod_uid = str(pod["metadata"]["uid"])
        row = self.store.row(pod_uid)
        if row is not None and row.instance_id is not None and row.state in _LIVE:
            waiting = waiting_message(pod, container)
            if waiting is not None and row.state is MappingState.RUNNING:
                # As a kubelet answers for a container not running yet, follow or not.
                raise LogError(
                    400,
                    f'container "{container}" in pod "{name}" is waiting to start: '
                    f"ContainerCreating ({waiting}); try again once the pod is Running",
                )
            return self._live(row.instance_id, exit_nonce(pod_uid), pod_uid, options, should_stop)
        member = clusters.member_of(pod)
        # A finished gang pod's lines were kept before its cluster went: no request.
        saved = self.store.saved_logs.read(pod_uid) if podinfo.is_finished(pod) else None
        if saved is None and member is not None and self._runs_gang(member[0], pod):
            return self._live(member[0], member[1], pod_uid, options, should_stop)
        saved = saved or self.store.saved_logs.read(pod_uid)
        if saved is not None:
            lines = (LogLine(ts, line) for ts, line in saved)
            nonce = member[1] if member is not None else exit_nonce(pod_uid)
            return iter(last_lines(lines, options, nonce))
        if row is None or row.state in (MappingState.PENDING, MappingState.CREATING):
            raise LogError(
                400,
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
            )
        raise LogError(
            404, f'the log of pod "{name}" was not kept: its instance ended before it could be read'
        )

    def _runs_gang(self, instance_id: str, pod: KubeObject) -> bool:
        """A gang pod's member, as its annotation names it, checked against RunPod's
        record (one GET): a forged id must not read another instance's log. The pod's
        Job must be its namespace's first (a cluster row records it, or one Kubernetes
        GET): its ownerReference is anyone's to write too."""
        if not self._job_is_its_namespaces(pod):
            log.warning(
                "refused a log read: pod %s names a Job UID that is no Job of its namespace",
                pod["metadata"].get("name"),
            )
            return False
        try:
            instance = self.runpod.instances.get(instance_id)
        except runpod_errors.RunPodNotFound:
            return False
        except runpod_errors.RunPodError as exc:
            raise LogError(
                502, f"RunPod did not say whose instance {instance_id} is: {exc}"
            ) from exc
        if clusters.runs_gang(instance, pod):
            return True
        log.warning(
            "refused a log read: pod %s names instance %r, no member of its Job's cluster",
            pod["metadata"].get("name"),
            instance_id,
        )
        return False

    def _job_is_its_namespaces(self, pod: KubeObject) -> bool:
        job = clusters.job_of(pod)
        if job is None:
            return False
        if job in clusters.jobs_recorded(self.store.load_clusters()):
            return True
        try:
            read = self.kube.jobs.get(job[0], clusters.job_name(pod) or "-")
        except kube_errors.KubeError as exc:
            raise LogError(502, f"the pod's Job could not be read: {exc}") from exc
        return read is not None and read["metadata"].get("uid") == job[1]

    def _check(
        self, namespace: str, name: str, container: str, options: LogOptions
    ) -> tuple[KubeObject, str]:
        """The pod and the container that runs, or a LogError saying why not."""
        for kind, value in (("namespace", namespace), ("pod name", name)):
            problem = name_problem(kind, value)
            if problem is not None:
                raise LogError(400, problem)
        if container and (problem := name_problem("container name", container)) is not None:
            raise LogError(400, problem)
        pod = self.kube.pods.find(namespace, name)
        if pod is None:
            raise LogError(404, f'pods "{name}" not found')
        if pod.get("spec", {}).get("nodeName") != self.node_name:
            raise LogError(404, f'pod "{namespace}/{name}" is not on node "{self.node_name}"')
        try:
            runs = choose_container(pod)["name"]
        except TranslationError as exc:
            raise LogError(
                400, f'pod "{name}" has no container that runs on RunPod: {exc}'
            ) from exc
        if container and container != runs:
            raise LogError(
                400,
                f'container "{container}" of pod "{name}" does not run: only '
                f'"{runs}" runs on RunPod (sidecars and init containers do '
                "not); ask for that one",
            )
        if options.previous:
            raise LogError(400, PREVIOUS_UNSUPPORTED)
        return pod, runs

    def _live(
        self,
        instance_id: str,
        nonce: str,
        pod_uid: str,
        options: LogOptions,
        should_stop: Callable[[], bool],
    ) -> Iterator[LogLine]:
        tail = options.tail_lines
        if self.follows is not None:
            history = self.follows.history(instance_id)
            if options.follow or history is not None:
                return self._shared(instance_id, pod_uid, nonce, options, should_stop, history)
        backfill_read = LogRead(
            tail=None if tail is None else tail + WRAPPER_SLACK, since=options.since
        )
        opened_at = self.clock()
        read = _Read(self._read(instance_id, backfill_read, opener=self._opener()))
        try:
            read.open()
        except LogsRefused as exc:
            raise LogError(503, str(exc)) from exc
        except runpod_errors.RunPodNotFound:
            return self._kept(instance_id, pod_uid, options, nonce)
        except (runpod_errors.RunPodError, LogStreamBroken) as exc:
            raise LogError(502, f"RunPod did not give the log: {exc}") from exc
        # Read as it is sent: a tail holds its lines (RunPod's most with a `since` too),
        # nothing else holds any, and a reader that stops stops the read.
        held = options if tail is None else replace(options, tail_lines=min(tail, MAX_TAIL))
        backfill = backfill_lines(read.lines(), held, nonce)
        if not options.follow:
            return backfill
        return self._followed(
            backfill, read, instance_id, nonce, options.since or opened_at, should_stop
        )

    def _kept(
        self, instance_id: str, pod_uid: str, options: LogOptions, nonce: str
    ) -> Iterator[LogLine]:
        """The log kept when the instance went, for an instance RunPod no longer has."""
        saved = self.store.saved_logs.read(pod_uid)
        if saved is None:
            raise LogError(
                404, f"RunPod instance {instance_id} is gone and its log was not kept"
            ) from None  # called while RunPod's 404 is handled: that is not the news
        return iter(last_lines((LogLine(ts, line) for ts, line in saved), options, nonce))

    def _followed(
        self,
        backfill: Iterator[LogLine],
        read: _Read,
        instance_id: str,
        nonce: str,
        since: datetime,
        should_stop: Callable[[], bool],
    ) -> Iterator[LogLine]:
        yield from backfill
        if read.ended:
            return
        follow = LogRead(
            after=read.last_id, since=None if read.last_id else since, tail=0, follow=True
        )
        events = self._read(instance_id, follow, should_stop)
        try:
            yield from users_lines((LogLine(event.ts, event.line) for event in events), nonce)
        except runpod_errors.RunPodNotFound:
            return  # the instance is gone: so is its log stream
        except (runpod_errors.RunPodError, LogStreamBroken) as exc:
            log.warning("following the log of %s stopped: %s", instance_id, exc)

    def _shared(
        self,
        instance_id: str,
        pod_uid: str,
        nonce: str,
        options: LogOptions,
        should_stop: Callable[[], bool],
        history: list[LogEvent] | None,
    ) -> Iterator[LogLine]:
        """From the instance's shared stream: a plain read while it is followed (no
        request), or a follower joining it (the first one's backfill is a request)."""
        assert self.follows is not None
        live: Iterator[LogEvent] = iter(())
        if options.follow or history is None:
            try:
                history, live = self.follows.follow(instance_id, should_stop)
            except LogsRefused as exc:
                raise LogError(503, str(exc)) from exc
            except runpod_errors.RunPodNotFound:
                return self._kept(instance_id, pod_uid, options, nonce)
            except (runpod_errors.RunPodError, LogStreamBroken) as exc:
                raise LogError(502, f"RunPod did not give the log: {exc}") from exc
        container = [LogLine(e.ts, e.line) for e in history if e.source == "container"]
        backfill = last_lines(container, options, nonce)
        if not options.follow:
            return iter(backfill)
        marker = exit_code_marker(nonce)
        if any(line.line.startswith(marker) for line in container):
            return iter(backfill)  # the process ended: what follows is the wrapper's
        followed = (LogLine(e.ts, e.line) for e in live if e.source == "container")
        return itertools.chain(backfill, users_lines(followed, nonce))

    def _opener(self, should_stop: Callable[[], bool] = lambda: False) -> LogStreamOpener:
        """RunPod's log stream, behind the endpoint's gate when there is one."""
        if self.gate is None:
            return self.runpod.instances.log_events
        return self.gate.opener(self.runpod.instances.log_events, False, should_stop)

    def _read(
        self,
        instance_id: str,
        read: LogRead,
        should_stop: Callable[[], bool] = lambda: False,
        opener: LogStreamOpener | None = None,
    ) -> Generator[LogEvent, None, bool]:
        return read_log(
            opener or self.runpod.instances.log_events,
            instance_id,
            read,
            backfill_idle_seconds=self.backfill_idle,
            follow_idle_seconds=self.follow_idle,
            sleep=self.sleep,
            should_stop=should_stop,
        )


class _Read:
    """A read's events as they come. `open()` takes the first (where RunPod's refusal
    shows, before an answer starts); `lines()` gives them all; then `last_id` and
    `ended` (the stream ended: the instance stopped) say where a follow goes on."""

    def __init__(self, events: Generator[LogEvent, None, bool]) -> None:
        self._events = events
        self._first: LogEvent | None = None
        self.last_id: str | None = None
        self.ended = False

    def open(self) -> None:
        self._first = self._next()

    def lines(self) -> Iterator[LogLine]:
        event = self._first
        self._first = None
        try:
            while event is not None:
                self.last_id = event.id
                yield LogLine(event.ts, event.line)
                event = self._next()
        except (runpod_errors.RunPodError, LogStreamBroken) as exc:
            # The answer has begun: it ends short, which its reader sees.
            raise LogError(502, f"RunPod's log stream broke: {exc}") from exc

    def _next(self) -> LogEvent | None:
        try:
            return next(self._events)
        except StopIteration as stop:
            self.ended = bool(stop.value)
            return None


def _drain(events: Generator[LogEvent, None, bool]) -> tuple[list[LogEvent], bool]:
    """Every event, and whether the stream ended (True) or went quiet (False)."""
    items: list[LogEvent] = []
    while True:
        try:
            items.append(next(events))
        except StopIteration as stop:
            return items, bool(stop.value)
