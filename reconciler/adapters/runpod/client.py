"""The RunPod REST v2 client: one session, one request function that owns retries.

Retry rules (docs/architecture.md §4):
- reads and DELETE are idempotent: retried on 429, 5xx and transport errors;
- a create and a registry create are retried on 429 only (RunPod refused
  them before acting). After a 5xx or a transport error they may have taken effect,
  so they raise with `in_doubt=True` and the caller decides (a create is adopted by
  its owner tags, never sent blindly again);
- 4xx other than 429 are final.
Waits honour `Retry-After`, else back off exponentially with jitter; both attempts and
total time are bounded. Within a tick (`deadline_in`) no request starts after the tick's
deadline, no read waits past it, and no retry is planned beyond it. All waiting goes
through the injected `sleep`, so tests pass a simulated clock and nothing really sleeps.

The API key lives only in the session's Authorization header: it is never logged,
never part of an error message and not shown by `repr()`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any
from urllib.parse import quote

import requests
import urllib3

from reconciler.adapters.runpod import errors
from reconciler.adapters.runpod.body import create_cluster_body, create_pod_body
from reconciler.adapters.runpod.logstream import (
    LogEvent,
    LogRead,
    LogStreamBroken,
    LogStreamIdle,
    read_log,
    sse_events,
)
from reconciler.adapters.runpod.parse import (
    parse_cpu_flavors,
    parse_gpu_types,
    parse_instance,
    parse_network_volume,
    parse_pod_billing,
    parse_registry,
    parse_resource_billing,
)
from reconciler.adapters.runpod.ratelimit import RateLimiter
from reconciler.adapters.runpod.unchanged import UnchangedInstances
from reconciler.core.capacity import pacing
from reconciler.core.domain import (
    USER_AGENT,
    BillingRecord,
    Cloud,
    ClusterRequest,
    CpuFlavor,
    CreateRequest,
    GpuType,
    Instance,
    RegistryAuth,
    ResourceCharge,
    RunPodVolume,
)

logger = logging.getLogger(__name__)

BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 30.0
# The tick's list: the pacing keeps it to a share of the requests that do the work.
LIST_ROUTE = "GET /v2/pods"
# The marker line is among the wrapper's last words (RunPod's few lines about the stop
# may follow it), so a short tail holds it.
EXIT_LOG_TAIL = 100


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    route: str
    idempotent: bool = True
    # For calls that may have acted although they failed: what the caller must assume.
    doubt: str = ""
    body: Any = None
    params: dict[str, str] | None = None
    stream: bool = False
    read_timeout: float | None = None
    # False for reads the next tick repeats anyway: a failure costs one request, not four.
    retry_failures: bool = True
    headers: dict[str, str] | None = None


class RunPodClient:
    def __init__(
        self,
        api_key: str,
        base_url: str = "https://api.runpod.io",
        *,
        connect_timeout: float = 5,
        read_timeout: float = 30,
        max_attempts: int = 4,
        max_retry_time: float = 60,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        on_response: Callable[[str, int], None] | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = (connect_timeout, read_timeout)
        self._max_attempts = max(1, max_attempts)
        self._max_retry_time = max_retry_time
        self._sleep = sleep
        self._monotonic = monotonic
        self._on_response = on_response
        self._limiter = RateLimiter()
        self._deadline: float | None = None
        self._listed = UnchangedInstances()
        self._session = _session_for(self._base_url)
        self._session.headers["Authorization"] = f"Bearer {api_key}"
        self._session.headers["Accept"] = "application/json"
        self._session.headers["User-Agent"] = USER_AGENT

    def __repr__(self) -> str:
        return f"RunPodClient(base_url={self._base_url!r})"

    def __enter__(self) -> RunPodClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._session.close()

    @property
    def rate_budget(self) -> int | None:
        """Requests we may still send now: our share when others use the key too."""
        return self._limiter.budget(self._monotonic())

    def rate_windows(self) -> list[pacing.Window]:
        """RunPod's quota windows as its latest answer told them, projected to now."""
        return self._limiter.windows(self._monotonic())

    def deadline_in(self, seconds: float | None) -> None:
        """Bound every request from now on to end within `seconds` (None: unbounded)."""
        self._deadline = None if seconds is None else self._monotonic() + seconds

    @property
    def past_deadline(self) -> bool:
        return self._deadline is not None and self._monotonic() >= self._deadline

    def tick_gap(self) -> float:
        """Seconds between the starts of two ticks that leave the quota to the work."""
        return self._limiter.tick_gap(self._monotonic())

    def quota_ample(self, extra: int = 1) -> bool:
        """Whether `extra` requests more, now, leave RunPod's quota ample: for work that
        can wait or be done otherwise (`reconciler.core.capacity.pacing.ample`)."""
        return self._limiter.ample(self._monotonic(), extra)

    # Pods

    def list_instances(self) -> list[Instance]:
        """Every instance of the account, Instant Cluster members included: one list
        serves both, so a tick's one request sees clusters too."""
        call = _Call("GET", "/v2/pods", LIST_ROUTE, params={"includeClusterPods": "true"})
        data = self._json(call)
        pods = data.get("pods") if isinstance(data, dict) else None
        if not isinstance(pods, list):
            raise errors.RunPodError("GET /v2/pods answered without a pods list")
        return self._listed.parse(pods)

    def get_instance(self, instance_id: str) -> Instance:
        path = f"/v2/pods/{_segment(instance_id)}"
        return parse_instance(self._json(_Call("GET", path, "GET /v2/pods/{id}")))

    def create_instance(self, request: CreateRequest) -> Instance:
        call = _Call(
            "POST",
            "/v2/pods",
            "POST /v2/pods",
            idempotent=False,
            doubt="the instance may exist anyway: look for it by its owner tags",
            body=create_pod_body(request),
        )
        instance = parse_instance(self._json(call))
        logger.info("created instance %s for %s", instance.id, request.name)
        return instance

    def delete_instance(self, instance_id: str) -> None:
        """Terminate for good. An instance that is already gone counts as deleted."""
        path = f"/v2/pods/{_segment(instance_id)}"
        try:
            self._send(_Call("DELETE", path, "DELETE /v2/pods/{id}")).close()
        except errors.RunPodNotFound:
            logger.debug("instance %s was already gone", instance_id)

    def create_cluster(self, request: ClusterRequest) -> str:
        """`POST /v2/clusters`; the new cluster's id. Never retried: a lost answer may
        have made it, and its members are found by their tags."""
        call = _Call(
            "POST",
            "/v2/clusters",
            "POST /v2/clusters",
            idempotent=False,
            doubt="the cluster may exist anyway: look for its members by their tags",
            body=create_cluster_body(request),
        )
        data = self._json(call)
        cluster_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(cluster_id, str) or not cluster_id:
            raise errors.RunPodError("POST /v2/clusters answered without a cluster id")
        logger.info("created cluster %s for %s", cluster_id, request.name)
        return cluster_id

    def cluster_members(self, cluster_id: str) -> list[Instance]:
        """`GET /v2/clusters/{id}/pods`: the cluster's members, read by id, so shown even
        while the list lags behind their create; RunPod's 404 for the cluster
        (`RunPodNotFound`) is the one proof that it is gone."""
        path = f"/v2/clusters/{_segment(cluster_id)}/pods"
        data = self._json(_Call("GET", path, "GET /v2/clusters/{id}/pods"))
        pods = data.get("pods") if isinstance(data, dict) else None
        if not isinstance(pods, list):
            raise errors.RunPodError(f"GET {path} answered without a pods list")
        return [parse_instance(pod) for pod in pods]

    def delete_cluster(self, cluster_id: str) -> None:
        """Delete a cluster and all its members. One already gone counts as deleted."""
        path = f"/v2/clusters/{_segment(cluster_id)}"
        try:
            self._send(_Call("DELETE", path, "DELETE /v2/clusters/{id}")).close()
        except errors.RunPodNotFound:
            logger.debug("cluster %s was already gone", cluster_id)

    def update_instance_env(self, instance_id: str, env: dict[str, str]) -> Instance:
        """PATCH the env. It replaces the instance's env whole: pass all of it."""
        call = _Call(
            "PATCH", f"/v2/pods/{_segment(instance_id)}", "PATCH /v2/pods/{id}", body={"env": env}
        )
        return parse_instance(self._json(call))

    def read_ended_log(self, instance_id: str, tail: int = EXIT_LOG_TAIL) -> list[LogEvent]:
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
            backfill_idle_seconds=self._timeout[1],
            follow_idle_seconds=self._timeout[1],
            max_resumes=0,
            sleep=self._sleep,
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
        call = _Call(
            "GET",
            f"/v2/pods/{_segment(instance_id)}/logs",
            "GET /v2/pods/{id}/logs",
            params=params,
            stream=True,
            read_timeout=idle_seconds,
            headers=headers,
            retry_failures=retry_failures,
        )
        with closing(self._send(call)) as response:
            if on_open is not None:
                on_open(_served_at(response))
            raw = (line.decode("utf-8", "replace") for line in response.iter_lines())
            try:
                yield from sse_events(raw)
            except requests.ConnectionError as exc:
                if exc.args and isinstance(exc.args[0], urllib3.exceptions.ReadTimeoutError):
                    raise LogStreamIdle(str(exc)) from exc
                raise LogStreamBroken(f"connection lost: {type(exc).__name__}") from exc
            except requests.RequestException as exc:
                raise LogStreamBroken(f"stream cut: {type(exc).__name__}") from exc

    # Catalog and registries

    def list_gpu_types(self, gpu_count: int = 1, cloud: Cloud | None = None) -> list[GpuType]:
        params = {"include": "AVAILABILITY", "product": "POD", "count": str(gpu_count)}
        if cloud is not None:
            params["cloud"] = cloud.value
        call = _Call("GET", "/v2/catalog/gpus", "GET /v2/catalog/gpus", params=params)
        return parse_gpu_types(self._json(call))

    def list_cpu_flavors(self) -> list[CpuFlavor]:
        params = {"include": "AVAILABILITY", "product": "POD"}
        call = _Call("GET", "/v2/catalog/cpus", "GET /v2/catalog/cpus", params=params)
        return parse_cpu_flavors(self._json(call))

    def list_registry_auths(self) -> list[RegistryAuth]:
        data = self._json(_Call("GET", "/v2/registries", "GET /v2/registries"))
        entries = data.get("registries") if isinstance(data, dict) else None
        return [parse_registry(entry) for entry in entries or []]

    def create_registry_auth(self, name: str, username: str, password: str) -> RegistryAuth:
        call = _Call(
            "POST",
            "/v2/registries",
            "POST /v2/registries",
            idempotent=False,
            doubt="the credential may have been stored anyway",
            body={"name": name, "username": username, "password": password},
        )
        return parse_registry(self._json(call))

    def delete_registry_auth(self, registry_id: str) -> bool:
        """Delete a credential; False when RunPod refuses because a pod still uses it."""
        path = f"/v2/registries/{_segment(registry_id)}"
        try:
            self._send(_Call("DELETE", path, "DELETE /v2/registries/{id}")).close()
        except errors.RunPodNotFound:
            logger.debug("registry credential %s was already gone", registry_id)
        except errors.RejectedError:
            return False
        return True

    # Network volumes

    def list_network_volumes(self) -> list[RunPodVolume]:
        data = self._json(_Call("GET", "/v2/network-volumes", "GET /v2/network-volumes"))
        entries = data.get("networkVolumes") if isinstance(data, dict) else None
        return [parse_network_volume(entry) for entry in entries or []]

    def get_network_volume(self, volume_id: str) -> RunPodVolume:
        """`GET /v2/network-volumes/{id}`: read by id, so shown even while the list lags
        behind its create; RunPod's 404 (`RunPodNotFound`) is the one proof it is gone."""
        path = f"/v2/network-volumes/{_segment(volume_id)}"
        return parse_network_volume(self._json(_Call("GET", path, "GET /v2/network-volumes/{id}")))

    def create_network_volume(
        self, name: str, size_gb: int, datacenter: str, kind: str | None = None
    ) -> RunPodVolume:
        body: dict[str, Any] = {"name": name, "size": size_gb, "dataCenter": datacenter}
        if kind is not None:
            body["type"] = kind
        call = _Call(
            "POST",
            "/v2/network-volumes",
            "POST /v2/network-volumes",
            idempotent=False,
            doubt="the volume may have been created anyway",
            body=body,
        )
        return parse_network_volume(self._json(call))

    def resize_network_volume(self, volume_id: str, size_gb: int) -> RunPodVolume:
        path = f"/v2/network-volumes/{_segment(volume_id)}"
        call = _Call("PATCH", path, "PATCH /v2/network-volumes/{id}", body={"size": size_gb})
        return parse_network_volume(self._json(call))

    def delete_network_volume(self, volume_id: str) -> None:
        """Delete a volume; already gone is done. RunPod refuses (RejectedError) while an
        instance mounts it."""
        path = f"/v2/network-volumes/{_segment(volume_id)}"
        try:
            self._send(_Call("DELETE", path, "DELETE /v2/network-volumes/{id}")).close()
        except errors.RunPodNotFound:
            logger.debug("network volume %s was already gone", volume_id)

    # Billing

    def pod_billing(self, start: datetime, end: datetime) -> list[BillingRecord]:
        """Hourly charges per pod in [start, end); RunPod snaps both to whole hours."""
        params = {"bucketSize": "hour", "startTime": _rfc3339(start), "endTime": _rfc3339(end)}
        call = _Call("GET", "/v2/billing/pods", "GET /v2/billing/pods", params=params)
        return parse_pod_billing(self._json(call))

    def network_volume_billing(self, start: datetime, end: datetime) -> list[ResourceCharge]:
        """Hourly storage charges per network volume in [start, end) (whole hours)."""
        return self._resource_billing("/v2/billing/network-volumes", "networkVolumeId", start, end)

    def cluster_billing(self, start: datetime, end: datetime) -> list[ResourceCharge]:
        """Hourly charges per Instant Cluster in [start, end) (whole hours)."""
        return self._resource_billing("/v2/billing/clusters", "clusterId", start, end)

    def _resource_billing(
        self, path: str, id_field: str, start: datetime, end: datetime
    ) -> list[ResourceCharge]:
        params = {"bucketSize": "hour", "startTime": _rfc3339(start), "endTime": _rfc3339(end)}
        route = f"GET {path}"
        return parse_resource_billing(
            self._json(_Call("GET", path, route, params=params)), route, id_field
        )

    # The one request function

    def _json(self, call: _Call) -> Any:
        with closing(self._send(call)) as response:
            return _decode(response, call.route)

    def _send(self, call: _Call) -> requests.Response:
        started = self._monotonic()
        attempt = 1
        while True:
            self._pace(call)
            try:
                return self._attempt(call)
            except errors.RunPodError as error:
                delay = self._retry_delay(call, error, attempt, started)
                if delay is None:
                    raise
                logger.warning(
                    "%s: attempt %d/%d failed: %s; will retry in %.1f s",
                    call.route,
                    attempt,
                    self._max_attempts,
                    error,
                    delay,
                )
                self._sleep(delay)
                attempt += 1

    def _pace(self, call: _Call) -> None:
        now = self._monotonic()
        delay = self._limiter.delay(now)
        if delay > 0 and self._deadline is not None and now + delay >= self._deadline:
            raise errors.DeadlinePassed(
                f"{call.route}: not sent, pacing would pass the tick's deadline"
            )
        if delay > 0:
            logger.debug("%s: pacing %.1f s to stay inside the rate limit", call.route, delay)
            self._sleep(delay)

    def _attempt(self, call: _Call) -> requests.Response:
        read_timeout = call.read_timeout or self._timeout[1]
        if self._deadline is not None:
            left = self._deadline - self._monotonic()
            if left <= 0:
                raise errors.DeadlinePassed(f"{call.route}: not sent, the tick's deadline passed")
            read_timeout = min(read_timeout, left)
        try:
            response = self._session.send(
                self._prepared(call),
                timeout=(min(self._timeout[0], read_timeout), read_timeout),
                stream=call.stream,
            )
        except requests.RequestException as exc:
            self._report(call, 0)
            raise self._transport_error(call, exc) from exc
        self._report(call, response.status_code)
        self._limiter.observe(
            response.headers, self._monotonic(), tick_list=call.route == LIST_ROUTE
        )
        if response.status_code >= 400:
            with closing(response):
                raise self._http_error(call, response)
        return response

    def _prepared(self, call: _Call) -> requests.PreparedRequest:
        """The request `Session.request` would send, built without its per-call merge
        of the session's settings: they never change, and merging them again (cookie
        jars, hooks, environment) cost 0.3 to 0.5 ms of CPU a request (docs, Performance).
        No cookies go back: RunPod authenticates by the key's header alone."""
        prepared = requests.PreparedRequest()
        prepared.prepare(
            method=call.method,
            url=self._base_url + call.path,
            headers={**self._session.headers, **(call.headers or {})},
            json=call.body,
            params=call.params,
        )
        return prepared

    def _report(self, call: _Call, status: int) -> None:
        if self._on_response is not None:
            self._on_response(call.route, status)

    def _transport_error(self, call: _Call, exc: requests.RequestException) -> errors.RunPodError:
        message = f"{call.route}: no answer from RunPod ({type(exc).__name__}: {exc})"
        in_doubt = not call.idempotent
        if in_doubt:
            message += f"; {call.doubt}"
        return errors.RunPodTransportError(self._redact(message), in_doubt=in_doubt)

    def _http_error(self, call: _Call, response: requests.Response) -> errors.RunPodError:
        status = response.status_code
        detail = self._redact(_problem_detail(response))
        message = f"{call.route} answered {status}: {detail or response.reason}"
        in_doubt = not call.idempotent and status >= 500
        if in_doubt:
            message += f"; {call.doubt}"
        cls = errors.error_class_for(status)
        if cls is errors.RateLimitedError:
            return errors.RateLimitedError(
                message, detail=detail, retry_after=_retry_after(response)
            )
        return cls(message, status=status, detail=detail, in_doubt=in_doubt)

    def _retry_delay(
        self, call: _Call, error: errors.RunPodError, attempt: int, started: float
    ) -> float | None:
        """Seconds to wait before the next attempt, or None to give up now."""
        if attempt >= self._max_attempts or not _retryable(call, error):
            return None
        delay = _backoff(attempt, error)
        now = self._monotonic()
        if now - started + delay > self._max_retry_time:
            return None
        if self._deadline is not None and now + delay >= self._deadline:
            return None
        return delay

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text


def _session_for(base_url: str) -> requests.Session:
    """A session that reads the environment (HTTPS_PROXY, NO_PROXY, REQUESTS_CA_BUNDLE)
    once, for the one host it talks to. Per request, as requests does by default, that
    reading cost more CPU than the rest of the request (docs, Performance); and a ~/.netrc entry
    can no longer replace the API key's header with its own credentials."""
    session = requests.Session()
    found = session.merge_environment_settings(base_url, {}, None, None, None)
    session.proxies.update(found["proxies"])
    session.verify = found["verify"]
    session.trust_env = False
    return session


def _retryable(call: _Call, error: errors.RunPodError) -> bool:
    if isinstance(error, errors.RateLimitedError):
        return True
    return (
        call.idempotent
        and call.retry_failures
        and isinstance(error, errors.RunPodServerError | errors.RunPodTransportError)
    )


def _backoff(attempt: int, error: errors.RunPodError) -> float:
    if isinstance(error, errors.RateLimitedError) and error.retry_after is not None:
        return error.retry_after
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
    # Jitter keeps several reconcilers from retrying in lockstep after one outage.
    return ceiling * random.uniform(0.5, 1.0)


def _retry_after(response: requests.Response) -> float | None:
    """Seconds from `Retry-After`; the contract sends integers, an HTTP date is ignored."""
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def _problem_detail(response: requests.Response) -> str:
    try:
        problem = response.json()
    except ValueError:
        return response.text[:200]
    if not isinstance(problem, dict):
        return ""
    detail = str(problem.get("detail") or problem.get("title") or "")
    violations = problem.get("errors")
    if isinstance(violations, list) and violations:
        detail += " (" + "; ".join(str(item) for item in violations) + ")"
    return detail


def _decode(response: requests.Response, route: str) -> Any:
    try:
        return response.json()
    except (ValueError, requests.RequestException) as exc:
        raise errors.RunPodTransportError(f"{route}: unreadable answer from RunPod") from exc


def _served_at(response: requests.Response) -> datetime | None:
    """The answer's Date header (RFC 9110: when the server made it), or None."""
    try:
        served = parsedate_to_datetime(response.headers.get("Date", ""))
    except (TypeError, ValueError):
        return None
    return served if served.tzinfo is not None else None


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _segment(value: str) -> str:
    """An id as one path segment, so an odd id can never address another route."""
    return quote(value, safe="")
