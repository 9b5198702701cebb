"""The RunPod REST v2 transport: one HTTP session, one request function that owns retries,
the shared rate limiter; every resource module of the client sends through it
(`reconciler.adapters.runpod.client` puts them together).

Retry rules (docs/architecture.md §4):
- reads and DELETE are idempotent: retried on 429, 5xx and transport errors;
- a create and a registry create are retried on 429 only (RunPod refused
  them before acting). After a 5xx or a transport error they may have taken effect,
  so they raise with `in_doubt=True` and the caller decides (a create is adopted by
  its owner tags, never sent blindly again);
- 4xx other than 429 are final.
Waits honour `Retry-After`, else back off exponentially with jitter; both attempts and
total time are bounded. Within a tick (`deadline_in`) no request starts after the tick's
deadline, no read waits past it, no answer is read past it (however slowly its bytes
come: `answer.py`), and no retry is planned beyond it. An answer larger than the cap
(`max_answer_bytes`) is refused before more than the cap is held. All waiting goes
through the injected `sleep`, so tests pass a simulated clock and nothing really sleeps.

The API key lives only in the session's Authorization header: it is never logged,
never part of an error message and not shown by `repr()`.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import quote

import requests

from reconciler.adapters.runpod import answer, errors
from reconciler.adapters.runpod.ratelimit import RateLimiter
from reconciler.adapters.runpod.served_clock import ServedClock
from reconciler.core.capacity import pacing
from reconciler.core.domain import USER_AGENT, is_runpod_id
from reconciler.core.printable import escaped, quoted

logger = logging.getLogger(__name__)

Made = TypeVar("Made")
MIB = 1024 * 1024
DEFAULT_MAX_ANSWER_BYTES = 64 * MIB
# An error's body is only read for its detail: a sentence, never megabytes.
_MAX_PROBLEM_BYTES = 64 * 1024
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 30.0
# The tick's list: the pacing keeps it to a share of the requests that do the work.
LIST_ROUTE = "GET /v2/pods"


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    route: str
    idempotent: bool = True
    # For calls that may have acted although they failed: what the caller must assume.
    doubt: str = ""
    body: Any = None
    params: dict[str, str] | None = None
    read_timeout: float | None = None
    # False for reads the next tick repeats anyway: a failure costs one request, not four.
    retry_failures: bool = True
    headers: dict[str, str] | None = None


class RunPodTransport:
    """One API key's HTTP session to RunPod, paced by the quota RunPod reports."""

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
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._max_answer_bytes = max_answer_bytes
        self._api_key = api_key
        self._timeout = (connect_timeout, read_timeout)
        self._max_attempts = max(1, max_attempts)
        self._max_retry_time = max_retry_time
        self._sleep = sleep
        self._monotonic = monotonic
        self._on_response = on_response
        self.served = ServedClock(monotonic)
        """RunPod's time, from its answers' Date: what graces are measured on."""
        self._limiter = RateLimiter()
        self._deadline: float | None = None
        self._session = _session_for(self._base_url)
        self._session.headers["Authorization"] = f"Bearer {api_key}"
        self._session.headers["Accept"] = "application/json"
        self._session.headers["User-Agent"] = USER_AGENT

    def __repr__(self) -> str:
        return f"RunPodTransport(base_url={self._base_url!r})"

    def __enter__(self) -> RunPodTransport:
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

    @property
    def read_timeout(self) -> float:
        """Seconds any one read may wait for RunPod (within the tick's deadline)."""
        return self._timeout[1]

    def sleep(self, seconds: float) -> None:
        """Waits through the injected clock (a simulated one in tests)."""
        self._sleep(seconds)

    # The one request function

    def json(self, call: Call) -> Any:
        """The answer's JSON, read whole within the tick's deadline and the size cap. A
        create whose answer could not be read may have acted: in doubt."""
        with closing(self.send(call)) as response:
            try:
                return self._read(response, call, self._max_answer_bytes)
            except errors.RunPodError as error:
                if call.idempotent:
                    raise
                message = f"{error}; {call.doubt}"
                raise errors.RunPodTransportError(message, in_doubt=True) from error

    def made(self, call: Call, parse: Callable[[Any], Made]) -> Made:
        """A create's answer, parsed; one that cannot be parsed (no id, an id not of
        RunPod's form) leaves the create in doubt: it may have made the resource."""
        data = self.json(call)
        try:
            return parse(data)
        except errors.RunPodError as error:
            message = f"{call.route}: {error}; {call.doubt}"
            raise errors.RunPodTransportError(message, in_doubt=True) from error

    def _read(self, response: requests.Response, call: Call, limit: int) -> Any:
        return answer.read_json(
            response,
            call.route,
            limit=limit,
            time_left=self._time_left,
            read_timeout=call.read_timeout or self._timeout[1],
        )

    def lines(self, response: requests.Response, call: Call) -> Iterator[bytes]:
        """A streamed answer's lines, within the tick's deadline and the size cap per
        line, each read waiting at most the call's read timeout (`answer.lines`)."""
        return answer.lines(
            response,
            call.route,
            limit=self._max_answer_bytes,
            time_left=self._time_left,
            idle_seconds=call.read_timeout or self._timeout[1],
        )

    def _time_left(self) -> float | None:
        return None if self._deadline is None else self._deadline - self._monotonic()

    def send(self, call: Call) -> requests.Response:
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

    def _pace(self, call: Call) -> None:
        now = self._monotonic()
        delay = self._limiter.delay(now)
        if delay > 0 and self._deadline is not None and now + delay >= self._deadline:
            raise errors.DeadlinePassed(
                f"{call.route}: not sent, pacing would pass the tick's deadline"
            )
        if delay > 0:
            logger.debug("%s: pacing %.1f s to stay inside the rate limit", call.route, delay)
            self._sleep(delay)

    def _attempt(self, call: Call) -> requests.Response:
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
                # Never read whole by requests: `answer.py` reads within deadline and cap.
                stream=True,
            )
        except requests.RequestException as exc:
            self._report(call, 0)
            raise self._transport_error(call, exc) from exc
        self._report(call, response.status_code)
        self.served.heard(served_at(response))
        self._limiter.observe(
            response.headers, self._monotonic(), tick_list=call.route == LIST_ROUTE
        )
        if response.status_code >= 400:
            with closing(response):
                raise self._http_error(call, response)
        return response

    def _prepared(self, call: Call) -> requests.PreparedRequest:
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

    def _report(self, call: Call, status: int) -> None:
        if self._on_response is not None:
            self._on_response(call.route, status)

    def _transport_error(self, call: Call, exc: requests.RequestException) -> errors.RunPodError:
        message = f"{call.route}: no answer from RunPod ({type(exc).__name__}: {exc})"
        in_doubt = not call.idempotent
        if in_doubt:
            message += f"; {call.doubt}"
        return errors.RunPodTransportError(self._redact(message), in_doubt=in_doubt)

    def _http_error(self, call: Call, response: requests.Response) -> errors.RunPodError:
        status = response.status_code
        detail = self._redact(self._problem_detail(response, call))
        message = f"{call.route} answered {status}: {detail or escaped(response.reason or '')}"
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
        self, call: Call, error: errors.RunPodError, attempt: int, started: float
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

    def _problem_detail(self, response: requests.Response, call: Call) -> str:
        """The problem's detail, from at most `_MAX_PROBLEM_BYTES` read within the deadline."""
        try:
            body = answer.read_body(
                response,
                call.route,
                limit=_MAX_PROBLEM_BYTES,
                time_left=self._time_left,
                read_timeout=call.read_timeout or self._timeout[1],
            )
        except errors.RunPodError:
            return ""
        # RunPod's words are shown (pod status, Events, logs, the CLI): escaped.
        try:
            return escaped(_detail_of(json.loads(body)))
        except ValueError:
            return escaped(body[:200].decode("utf-8", "replace"))


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


def _retryable(call: Call, error: errors.RunPodError) -> bool:
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


def _detail_of(problem: object) -> str:
    if not isinstance(problem, dict):
        return ""
    detail = str(problem.get("detail") or problem.get("title") or "")
    violations = problem.get("errors")
    if isinstance(violations, list) and violations:
        detail += " (" + "; ".join(str(item) for item in violations) + ")"
    return detail


def served_at(response: requests.Response) -> datetime | None:
    """The answer's Date header (RFC 9110: when the server made it), or None."""
    try:
        served = parsedate_to_datetime(response.headers.get("Date", ""))
    except (TypeError, ValueError):
        return None
    return served if served.tzinfo is not None else None


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def segment(value: str) -> str:
    """An id as one path segment, so an odd id can never address another route: one not
    of RunPod's form (`.`, `..`, a slash, empty) is refused before any request."""
    if not is_runpod_id(value):
        raise errors.InvalidId(f"{quoted(str(value))} is not a RunPod id: no request sent")
    return quote(value, safe="")
