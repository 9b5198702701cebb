"""Reading one answer's body from RunPod, bounded in time and in size.

requests' timeout bounds each socket read, not the whole answer: a body trickled one
byte at a time, each within the read timeout, would be read for as long as RunPod sends
it, long past the tick's deadline. And `Response.json()` holds the whole body, then its
text, then the parsed value: a huge answer costs the process several times its size. So
the body is read here piece by piece: the deadline is checked before each read, each
read waits at most for what is left of it, and the answer is refused once it passes the
cap, before more than the cap is held.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import requests
import urllib3

from reconciler.adapters.runpod import errors

# One read's share of the body: large enough that a big list costs few reads.
_PIECE = 64 * 1024


def read_json(
    response: requests.Response,
    route: str,
    *,
    limit: int,
    time_left: Callable[[], float | None],
    read_timeout: float,
) -> Any:
    """The answer's JSON, read from a response opened with `stream=True` (`read_body`);
    `RunPodTransportError` when it does not parse."""
    body = read_body(response, route, limit=limit, time_left=time_left, read_timeout=read_timeout)
    try:
        return json.loads(body)
    except ValueError as exc:
        raise errors.RunPodTransportError(f"{route}: unreadable answer from RunPod") from exc


def read_body(
    response: requests.Response,
    route: str,
    *,
    limit: int,
    time_left: Callable[[], float | None],
    read_timeout: float,
) -> bytearray:
    """The answer's body. Raises `AnswerTooLarge` past `limit` bytes, `DeadlinePassed`
    when `time_left()` runs out before its end (None: no deadline),
    `RunPodTransportError` when it is cut off."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(route, limit)
    try:
        body = _read_body(response, route, limit, time_left, read_timeout)
    except (urllib3.exceptions.HTTPError, requests.RequestException, OSError) as exc:
        left = time_left()
        if left is not None and left <= 0:  # the read waited out what was left
            raise _past_deadline(route) from exc
        raise errors.RunPodTransportError(
            f"{route}: answer cut off ({type(exc).__name__})"
        ) from exc
    return body


def _read_body(
    response: requests.Response,
    route: str,
    limit: int,
    time_left: Callable[[], float | None],
    read_timeout: float,
) -> bytearray:
    body = bytearray()
    while True:
        left = time_left()
        if left is not None and left <= 0:
            raise _past_deadline(route)
        _wait_at_most(response, read_timeout if left is None else min(read_timeout, left))
        piece = response.raw.read1(_PIECE, decode_content=True)
        if not piece:
            return body
        body += piece
        if len(body) > limit:
            raise _too_large(route, limit)


def lines(
    response: requests.Response,
    route: str,
    *,
    limit: int,
    time_left: Callable[[], float | None],
    idle_seconds: float,
) -> Iterator[bytes]:
    """A streamed answer's lines (a log's Server-Sent Events) as they come, each read
    waiting at most `idle_seconds` (urllib3's `ReadTimeoutError` after that) and none
    past the deadline (`DeadlinePassed`); a line longer than `limit` is refused
    (`AnswerTooLarge`). urllib3's errors for a cut stream pass through."""
    pending = bytearray()
    while True:
        left = time_left()
        if left is not None and left <= 0:
            raise _past_deadline(route)
        _wait_at_most(response, idle_seconds if left is None else min(idle_seconds, left))
        try:
            piece = response.raw.read1(_PIECE, decode_content=True)
        except urllib3.exceptions.ReadTimeoutError as exc:
            left = time_left()
            if left is not None and left <= 0:
                raise _past_deadline(route) from exc
            raise
        if not piece:
            if pending:
                yield bytes(pending)
            return
        pending += piece
        *complete, rest = pending.split(b"\n")
        for line in complete:
            yield bytes(line.rstrip(b"\r"))
        pending = bytearray(rest)
        if len(pending) > limit:
            raise _too_large(route, limit)


def _past_deadline(route: str) -> errors.DeadlinePassed:
    return errors.DeadlinePassed(f"{route}: the answer was still coming at the tick's deadline")


def _too_large(route: str, limit: int) -> errors.AnswerTooLarge:
    return errors.AnswerTooLarge(
        f"{route}: answer larger than {limit // (1024 * 1024)} MiB "
        "(--runpod-max-answer-mib); refused"
    )


def _wait_at_most(response: requests.Response, seconds: float) -> None:
    """Let the next socket read wait at most `seconds` (the socket's timeout is what
    requests set when it sent the request, the read timeout or what was left then)."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(max(seconds, 0.001))
