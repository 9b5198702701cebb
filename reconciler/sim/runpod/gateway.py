"""What every request to the simulated RunPod passes before its route, and the log of them.

An API request is refused 403 (error code 1010) for urllib's default User-Agent, as
RunPod's gateway does, then 401 without the bearer key, then 429 with `Retry-After`
when a rate window is spent (`limits`); an injected fault answers next
(`faults`), then the route. Every authenticated answer carries `RateLimit` and
`RateLimit-Policy`. Each API request is logged, headers as sent with Authorization
masked and a registry password masked in the body. Admin requests (`/_sim/`) need no
key, are not rate limited and are not logged.
"""

from __future__ import annotations

import hmac
from collections import deque
from collections.abc import Mapping
from typing import Any

from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.faults import Faults
from reconciler.sim.runpod.http import (
    BadJson,
    Reply,
    Router,
    SimRequest,
    StreamServer,
    parse_json,
    split_target,
)
from reconciler.sim.runpod.limits import RateWindows
from reconciler.sim.runpod.pods import iso
from reconciler.sim.runpod.validate import Problem

REQUEST_LOG_LIMIT = 20_000
# The User-Agent urllib sends by default; RunPod's gateway answers it 403 (error 1010).
_REFUSED_USER_AGENT = "python-urllib/"


class Gateway:
    def __init__(
        self,
        account: Account,
        faults: Faults,
        logs: StreamServer,
        routers: tuple[Router, Router],
        *,
        api_key: str,
        quota: tuple[int, int, int],
    ) -> None:
        """`routers`: the API's routes, then the test controls' (`/_sim/`)."""
        self.clock = account.clock
        self.logs = logs
        self._account = account
        self._faults = faults
        self._api_key = api_key
        self._quota = quota
        self._api, self._admin = routers
        self.reset()

    def reset(self) -> None:
        """Forget the quota used and the request log."""
        with self._account.lock:
            self._limits = RateWindows(self._quota)
            self.log: deque[SimRequest] = deque(maxlen=REQUEST_LOG_LIMIT)

    def stall(self, seconds: float) -> bool:
        """Wait `seconds` of real time; True if the simulator was stopped meanwhile."""
        return self._account.stopping.wait(seconds)

    def handle_api(
        self,
        method: str,
        target: str,
        authorization: str | None,
        raw_body: bytes,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        path, params = split_target(target)
        body = parse_json(raw_body)
        seen = {
            name: ("***" if name.lower() == "authorization" else value)
            for name, value in (headers or {}).items()
        }
        with self._account.lock:
            self._account.just_created = None
            if _user_agent(seen).lower().startswith(_REFUSED_USER_AGENT):
                reply = Reply.problem(Problem(403, "error code: 1010 (browser signature banned)"))
            else:
                reply = self._authorized_reply(
                    method,
                    path,
                    params,
                    authorization,
                    body,
                    {k.lower(): v for k, v in (headers or {}).items()},
                )
            made = self._account.just_created
            self.log.append(
                SimRequest(
                    method,
                    path,
                    params,
                    reply.status,
                    _masked(body),
                    seen,
                    iso(self.clock.now()),
                    made.id if made else None,
                    iso(made.listed_from) if made and made.listed_from else None,
                )
            )
        return reply

    def handle_admin(self, method: str, target: str, raw_body: bytes) -> Reply:
        path, params = split_target(target)
        with self._account.lock:
            try:
                body = parse_json(raw_body)
                if isinstance(body, BadJson):
                    raise Problem(400, "request body is not valid JSON")
                return self._admin.dispatch(method, path, params, body, self.clock.now())
            except Problem as problem:
                return Reply.problem(problem)
            except KeyError as exc:
                return Reply.problem(Problem(404, f"not found: {exc}"))
            except (ValueError, TypeError) as exc:
                return Reply.problem(Problem(400, str(exc)))

    def _authorized_reply(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        authorization: str | None,
        body: Any,
        request_headers: dict[str, str],
    ) -> Reply:
        if not self._authorized(authorization):
            return Reply.problem(Problem(401, "missing or invalid bearer token"))
        seconds = self.clock.now().timestamp()
        refused = self._limits.admit(seconds)
        headers = self._limits.headers(seconds)
        if refused is not None:
            # As the contract's example: the detail names the window that was exceeded.
            window, retry_after = refused
            detail = f"rate limit exceeded for the {window} window"
            reply = Reply.problem(Problem(429, detail, headers={"Retry-After": str(retry_after)}))
        else:
            reply = self._answer(method, path, params, body, request_headers)
        reply.headers.update(headers)
        return reply

    def _authorized(self, authorization: str | None) -> bool:
        expected = f"Bearer {self._api_key}".encode()
        return authorization is not None and hmac.compare_digest(authorization.encode(), expected)

    def _answer(
        self, method: str, path: str, params: dict[str, str], body: Any, headers: dict[str, str]
    ) -> Reply:
        try:
            self._faults.raise_injected(method, path)
            if isinstance(body, BadJson):
                raise Problem(400, "request body is not valid JSON")
            reply = self._api.dispatch(method, path, params, body, self.clock.now(), headers)
            return self._faults.shape_answer(method, path, reply)
        except Problem as problem:
            return Reply.problem(problem)


def _user_agent(headers: Mapping[str, str]) -> str:
    for name, value in headers.items():
        if name.lower() == "user-agent":
            return value
    return ""


def _masked(body: Any) -> Any:
    if isinstance(body, dict) and "password" in body:
        return {**body, "password": "***"}
    return None if isinstance(body, BadJson) else body
