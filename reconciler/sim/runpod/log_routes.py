"""The simulated RunPod's log route, the streams it keeps open, and the pods' logs as
tests write them (the stream's rules in `logs`).

    GET    /v2/pods/{id}/logs   SSE (`source`, `tail`, `since`, `Last-Event-ID`): open
                                while the pod runs

A stream is served in its request's own thread (`serve_stream`), woken by
`Account.log_written` when a pod's log or life changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.http import Reply, Request, RouteTable
from reconciler.sim.runpod.logs import LogStream, new_lines, open_stream
from reconciler.sim.runpod.pods import LogLine, sse_event

# How often an idle log stream looks for lines a clock move made visible (real seconds).
_LOG_POLL_SECONDS = 0.05
_EVENTS_PER_WRITE = 256

ROUTES = RouteTable()


class LogRoutes:
    def __init__(self, account: Account) -> None:
        self._account = account
        self.reset()

    def reset(self) -> None:
        self._open: list[LogStream] = []
        self._next_drops: dict[str, int] = {}
        self._gaps: dict[str, float] = {}

    @ROUTES("GET", "/v2/pods/{id}/logs")
    def _pod_logs(self, request: Request) -> Reply:
        pod = self._account.served_pod(request.id)
        stream = open_stream(pod, request.now, request.params, request.headers.get("last-event-id"))
        if pod.id in self._next_drops:
            stream.drop_after = self._next_drops.pop(pod.id)
        stream.backfill_gap = self._gaps.get(pod.id, 0.0)
        # Open from now on (before its first byte), so a test can cut it at once.
        self._open.append(stream)
        headers = {
            "Cache-Control": "no-cache",
            "Connection": "keep-alive",
            "X-Accel-Buffering": "no",
        }
        return Reply(200, None, headers, "text/event-stream; charset=utf-8", stream=stream)

    def serve_stream(self, stream: LogStream, send: Callable[[bytes], None]) -> bool:
        """Send the stream's events through `send` until the pod's log ends (True) or
        the stream is cut (False). Runs in the request's own thread."""
        try:
            if not self._send_backfill(stream, send):
                return False
            while True:
                with self._account.lock:
                    pod = self._account.pods.get(stream.pod_id)
                    now = self._account.clock.now()
                    if pod is None or self._account.stopping.is_set():
                        return True
                    pending = new_lines(pod, now, stream)
                    if not pending and not pod.log_is_open(now):
                        return True
                    if not pending and stream.drop_after != 0:
                        # Clock moves are not notified: poll for lines they make visible.
                        self._account.log_written.wait(_LOG_POLL_SECONDS)
                        pending = new_lines(pod, self._account.clock.now(), stream)
                if not _send_lines(stream, pending, send):
                    return False
        finally:
            self.close_stream(stream)

    def _send_backfill(self, stream: LogStream, send: Callable[[bytes], None]) -> bool:
        """The backfill at once, or event by event when the pod's backfills are slow;
        False when the stream was cut."""
        if not stream.backfill_gap:
            return _send_lines(stream, stream.backfill, send)
        for line in stream.backfill:
            if self._account.stopping.wait(stream.backfill_gap):
                return True  # shutting down: the live loop ends the stream
            if not _send_lines(stream, [line], send):
                return False
        return True

    def close_stream(self, stream: LogStream) -> None:
        with self._account.lock:
            if stream in self._open:  # reset() may have forgotten it
                self._open.remove(stream)

    def container_lines(self, instance_id: str) -> list[str]:
        """What the pod's container printed so far."""
        with self._account.lock:
            return [
                line.line
                for line in self._account.pod(instance_id).visible_log(
                    self._account.clock.now(), "container"
                )
            ]

    def write_container(self, instance_id: str, lines: Sequence[str]) -> None:
        """The pod's container prints `lines` now (stdout and stderr alike)."""
        with self._account.lock:
            pod = self._account.pod(instance_id)
            if not pod.log_is_open(self._account.clock.now()):
                raise ValueError(
                    f"pod {instance_id} is {pod.status(self._account.clock.now())}: "
                    "no container is running to print"
                )
            for line in lines:
                pod.write_log(self._account.clock.now(), "container", str(line))
            self._account.log_written.notify_all()

    def write_system(self, instance_id: str, lines: Sequence[str]) -> None:
        """RunPod itself logs `lines` about the pod now (`source=system`: image pull
        progress, start-up, errors), at any status, as its host does."""
        with self._account.lock:
            pod = self._account.pod(instance_id)
            for line in lines:
                pod.write_log(self._account.clock.now(), "system", str(line))
            self._account.log_written.notify_all()

    def drop_streams(self, instance_id: str, after: int = 0, *, next_one: bool = False) -> int:
        """Cut the pod's open log streams after `after` more events each (or, with
        `next_one`, the next stream opened); returns how many streams were marked."""
        with self._account.lock:
            self._account.pod(instance_id)
            if next_one:
                self._next_drops[instance_id] = after
                return 1
            marked = [s for s in self._open if s.pod_id == instance_id]
            for stream in marked:
                stream.drop_after = after
            self._account.log_written.notify_all()
            return len(marked)

    def slow_backfill(self, instance_id: str, seconds: float) -> None:
        """Streams of the pod opened from now on send their backfill one event at a time,
        `seconds` (real time) before each, as a slow server does; 0 makes them prompt."""
        if seconds < 0:
            raise ValueError("seconds must be 0 or more")
        with self._account.lock:
            self._account.pod(instance_id)
            self._gaps[instance_id] = seconds

    @property
    def open_streams(self) -> int:
        with self._account.lock:
            return len(self._open)


def _send_lines(stream: LogStream, lines: list[LogLine], send: Callable[[bytes], None]) -> bool:
    """Send what the stream may carry of `lines`, a few events per write as a server
    streams a long backfill; False when it must be cut after them."""
    sent, cut = stream.take(lines)
    for start in range(0, len(sent), _EVENTS_PER_WRITE):
        send("".join(sse_event(line) for line in sent[start : start + _EVENTS_PER_WRITE]).encode())
    stream.advance(sent)
    return not cut
