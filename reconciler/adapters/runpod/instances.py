"""Instances (RunPod's pods): list, read, create, change, delete, and their logs."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime
from functools import partial

import requests
import urllib3

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.body import create_pod_body
from reconciler.adapters.runpod.logstream import (
    LogEvent,
    LogRead,
    LogStreamBroken,
    LogStreamIdle,
    read_log,
    sse_events,
)
from reconciler.adapters.runpod.parse import parse_instance
from reconciler.adapters.runpod.transport import (
    LIST_ROUTE,
    Call,
    RunPodTransport,
    segment,
    served_at,
)
from reconciler.adapters.runpod.unchanged import UnchangedInstances
from reconciler.core.domain import CreateRequest, Instance

logger = logging.getLogger(__name__)

# The marker line is among the wrapper's last words (RunPod's few lines about the stop
# may follow it), so a short tail holds it.
EXIT_LOG_TAIL = 100


class InstancesApi:
    """`/v2/pods`: the account's instances, Instant Cluster members among them."""

    def __init__(self, transport: RunPodTransport) -> None:
        self._transport = transport
        self._listed = UnchangedInstances()
        self.listed_at: datetime | None = None
        """When RunPod answered the last list, by its own clock (None: not said)."""

    def list(self) -> list[Instance]:
        """Every instance of the account, Instant Cluster members included: one list
        serves both, so a tick's one request sees clusters too."""
        call = Call("GET", "/v2/pods", LIST_ROUTE, params={"includeClusterPods": "true"})
        data, self.listed_at = self._transport.json_at(call)
        pods = data.get("pods") if isinstance(data, dict) else None
        if not isinstance(pods, list):
            raise errors.RunPodError("GET /v2/pods answered without a pods list")
        return self._listed.parse(pods)

    def get(self, instance_id: str) -> Instance:
        path = f"/v2/pods/{segment(instance_id)}"
        return parse_instance(self._transport.json(Call("GET", path, "GET /v2/pods/{id}")))

    def create(self, request: CreateRequest) -> Instance:
        call = Call(
            "POST",
            "/v2/pods",
            "POST /v2/pods",
            idempotent=False,
            doubt="the instance may exist anyway: look for it by its owner tags",
            body=create_pod_body(request),
        )
        instance = self._transport.made(call, parse_instance)
        logger.info("created instance %s for %s", instance.id, request.name)
        return instance

    def delete(self, instance_id: str) -> None:
        """Terminate for good. An instance that is already gone counts as deleted."""
        path = f"/v2/pods/{segment(instance_id)}"
        try:
            self._transport.send(Call("DELETE", path, "DELETE /v2/pods/{id}")).close()
        except errors.RunPodNotFound:
            logger.debug("instance %s was already gone", instance_id)

    def update_env(self, instance_id: str, env: dict[str, str]) -> Instance:
        """PATCH the env. It replaces the instance's env whole: pass all of it."""
        call = Call(
            "PATCH", f"/v2/pods/{segment(instance_id)}", "PATCH /v2/pods/{id}", body={"env": env}
        )
        return parse_instance(self._transport.json(call))

    def read_ended_log(
        self, instance_id: str, tail: int = EXIT_LOG_TAIL
    ) -> builtins.list[LogEvent]:
        """The last `tail` lines of a stopped instance's log, RunPod's system lines among
        them (one request): where our batch wrapper printed the exit code, and what is
        kept of the log once the instance is gone (`logstream.exit_log` reads the code).

        The instance has stopped, so its stream is all backfill and ends after it. Each
        event may take as long as any read may (the read timeout, within the tick's
        deadline), so a slow backfill is read whole, never cut short by a silence. A
        broken stream is not resumed here: the next tick reads again.
        """
        events = read_log(
            partial(self.log_events, retry_failures=False),
            instance_id,
            LogRead(source=None, tail=max(tail, EXIT_LOG_TAIL)),
            backfill_idle_seconds=self._transport.read_timeout,
            follow_idle_seconds=self._transport.read_timeout,
            max_resumes=0,
            sleep=self._transport.sleep,
        )
        try:
            return list(events)
        except LogStreamBroken as exc:
            raise errors.RunPodTransportError(f"GET /v2/pods/{{id}}/logs: {exc}") from exc

    def log_events(
        self,
        instance_id: str,
        *,
        source: str | None,
        tail: int | None,
        since: datetime | None,
        last_event_id: str | None,
        idle_seconds: float,
        on_open: Callable[[datetime | None], None] | None = None,
        retry_failures: bool = True,
    ) -> Iterator[LogEvent]:
        """One log stream, event by event, until it ends. Raises LogStreamBroken when it
        breaks, LogStreamIdle after `idle_seconds` of silence (one request either way;
        more when opening it fails and `retry_failures` allows retries). `on_open` is
        told when RunPod served the request (its Date header)."""
        params = {"source": source} if source else {}
        if since is not None:
            params["since"] = since.astimezone(UTC).isoformat().replace("+00:00", "Z")
        elif tail is not None:
            params["tail"] = str(tail)
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        call = Call(
            "GET",
            f"/v2/pods/{segment(instance_id)}/logs",
            "GET /v2/pods/{id}/logs",
            params=params,
            read_timeout=idle_seconds,
            headers=headers,
            retry_failures=retry_failures,
        )
        with closing(self._transport.send(call)) as response:
            if on_open is not None:
                on_open(served_at(response))
            lines = self._transport.lines(response, call)
            raw = (line.decode("utf-8", "replace") for line in lines)
            try:
                yield from sse_events(raw)
            except urllib3.exceptions.ReadTimeoutError as exc:
                raise LogStreamIdle(str(exc)) from exc
            except (urllib3.exceptions.HTTPError, requests.RequestException, OSError) as exc:
                raise LogStreamBroken(f"stream cut: {type(exc).__name__}") from exc
