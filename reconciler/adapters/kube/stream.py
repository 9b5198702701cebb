"""A watch's answer as it arrives: one JSON event per line of a chunked HTTP response.

The official client's `watch.Watch` would deserialise every object into models; like the
rest of the adapter this reads raw JSON. `close()` may be called from another thread:
it shuts the socket down, which ends a read that is blocked waiting for the next event.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import urllib3

from reconciler.adapters.kube.errors import KubeError, KubeTransportError, error_for
from reconciler.core.domain import KubeObject

# Bytes asked for per read; a chunked answer yields each chunk as soon as it arrives.
_READ_SIZE = 64 * 1024


class WatchStream:
    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def events(self) -> Iterator[tuple[str, KubeObject]]:
        """(type, object) per event until the server ends the watch.

        An ERROR event raises the error it carries (410 Gone: the resourceVersion is too
        old); a broken connection raises KubeTransportError.
        """
        try:
            for line in _lines(self._response.stream(_READ_SIZE, decode_content=True)):
                kind, obj = _decode(line)
                if kind == "ERROR":
                    raise error_for(int(obj.get("code") or 500), json.dumps(obj))
                yield kind, obj
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise KubeTransportError(f"the watch broke off: {error}") from error

    def close(self) -> None:
        # shutdown() first: release_conn() alone would not wake a read in another thread.
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            self._response.shutdown()
        with contextlib.suppress(OSError):
            self._response.release_conn()


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Chunk boundaries need not fall on event boundaries: split on newlines ourselves."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending


def _decode(line: bytes) -> tuple[str, Any]:
    try:
        event = json.loads(line)
        return str(event["type"]), event["object"]
    except (ValueError, KeyError, TypeError) as error:
        raise KubeError(f"unreadable watch event: {line[:200]!r}") from error
