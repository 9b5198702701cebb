"""Reading the exit code our batch wrapper leaves in a pod's container log.

`GET /v2/pods/{id}/logs` is a Server-Sent Events stream: every event has an `id:`
line and a `data:` line holding `{"ts", "source", "line"}`. The stream backfills the
last `tail` lines and then stays open for live lines, so the reader stops on its own
once the backfill is in (see `RunPodClient.read_exit_code`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from reconciler.core.contract import EXIT_CODE_MARKER

_LEADING_INT = re.compile(r"-?\d+")


def sse_log_lines(raw_lines: Iterable[str]) -> Iterator[str]:
    """The `line` of each event in an SSE stream, in order."""
    data: list[str] = []
    for raw in raw_lines:
        if raw.startswith("data:"):
            data.append(raw[5:].removeprefix(" "))
        elif raw == "" and data:
            yield _event_line("\n".join(data))
            data = []
    if data:
        yield _event_line("\n".join(data))


def _event_line(payload: str) -> str:
    try:
        event = json.loads(payload)
    except ValueError:
        return payload
    return str(event.get("line", "")) if isinstance(event, dict) else payload


def exit_code_from(lines: Iterable[str]) -> int | None:
    """The integer after the last marker line, or None when no line carries one."""
    code: int | None = None
    for line in lines:
        if EXIT_CODE_MARKER in line:
            code = _parse_code(line.rsplit(EXIT_CODE_MARKER, 1)[1])
    return code


def _parse_code(text: str) -> int | None:
    match = _LEADING_INT.match(text.strip())
    return int(match.group()) if match else None
