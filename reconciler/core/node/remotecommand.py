"""What a kubelet and an API server agree on for `kubectl exec`, beside the framing: the
request's options, the protocol versions, the terminal sizes a client sends, and the
status a kubelet writes on the error stream when the command ends.

The API server turns `kubectl exec -i -t POD -- CMD...` into the kubelet query
`command=CMD&command=...&input=1&output=1&tty=1`. From `v4.channel.k8s.io` on, the
error stream carries a JSON `Status` (`Success`, or `Failure` with reason
`NonZeroExitCode` and the code as the `ExitCode` cause); older versions carry only a
failure's message as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

V4 = "v4.channel.k8s.io"
# Newest first: the versions of the exec protocol we serve over SPDY.
EXEC_PROTOCOLS = (V4, "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
PORT_FORWARD_PROTOCOLS = ("portforward.k8s.io",)

# The stream types a client opens, named by its `streamType` header.
STREAM_ERROR, STREAM_STDIN, STREAM_STDOUT, STREAM_STDERR = "error", "stdin", "stdout", "stderr"
STREAM_RESIZE, STREAM_DATA = "resize", "data"


class ExecRequestError(ValueError):
    """A request a kubelet would refuse with 400; the message says why."""


@dataclass(frozen=True)
class ExecRequest:
    command: tuple[str, ...]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    def streams(self) -> frozenset[str]:
        """The stream types a client opens for this request (error always)."""
        wanted = {STREAM_ERROR}
        for name, on in (
            (STREAM_STDIN, self.stdin),
            (STREAM_STDOUT, self.stdout),
            (STREAM_STDERR, self.stderr),
            (STREAM_RESIZE, self.tty),
        ):
            if on:
                wanted.add(name)
        return frozenset(wanted)


def parse_exec(query: Mapping[str, Sequence[str]]) -> ExecRequest:
    """The kubelet's reading of the query: a flag is on only as "1"; with a tty there
    is no separate stderr (the terminal merges it), as the kubelet decides."""

    def flag(name: str) -> bool:
        return list(query.get(name, ()))[:1] == ["1"]

    command = tuple(query.get("command", ()))
    if not command:
        raise ExecRequestError("you must specify at least one command for the container")
    if any("\x00" in part for part in command):
        # No argv of a process can hold one (a C string ends there), and sshd cuts the
        # command line at it: refused rather than run as something else.
        raise ExecRequestError("the command holds a NUL character, which no argument can hold")
    tty = flag("tty")
    request = ExecRequest(command, flag("input"), flag("output"), flag("error") and not tty, tty)
    if not (request.stdin or request.stdout or request.stderr):
        raise ExecRequestError("you must specify at least 1 of stdin, stdout, stderr")
    return request


def negotiate(offered: Sequence[str], served: Sequence[str]) -> str | None:
    """The first protocol the client offers that we serve (the client's order rules)."""
    return next((protocol for protocol in offered if protocol in served), None)


def exit_status(protocol: str, command: Sequence[str], code: int) -> bytes:
    """The error stream's last words for a command that exited with `code`."""
    if code == 0:
        return _status(protocol, {"status": "Success"}, "")
    message = (
        "command terminated with non-zero exit code: "
        f"error executing command {_go_list(command)}, exit code {code}"
    )
    status = {
        "status": "Failure",
        "message": message,
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }
    return _status(protocol, status, message)


def internal_error(protocol: str, reason: str) -> bytes:
    """A failure that is not the command's: the exec could not run at all."""
    message = f"Internal error occurred: {reason}"
    status = {
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
        "details": {"causes": [{"message": reason}]},
        "code": 500,
    }
    return _status(protocol, status, message)


def _status(protocol: str, status: Mapping[str, object], message: str) -> bytes:
    if protocol != V4:
        return message.encode()
    return json.dumps({"metadata": {}, **status}, separators=(",", ":")).encode()


def _go_list(items: Sequence[str]) -> str:
    return "[" + " ".join(items) + "]"


@dataclass(frozen=True)
class TerminalSize:
    width: int
    height: int


_MAX_RESIZE = 4096


def _dimension(value: object) -> TypeGuard[int]:
    """A terminal's side as Go's TerminalSize holds it (uint16); 0, -1 or 2^32 are
    no size a terminal has: such a message is ignored, as the kubelet fails to decode it."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 0xFFFF


class ResizeDecoder:
    """The resize stream is a run of JSON objects `{"Width":w,"Height":h}`, one per
    change, which may arrive split across data frames."""

    def __init__(self) -> None:
        self._pending = ""
        self._json = json.JSONDecoder()

    def feed(self, data: bytes) -> Iterator[TerminalSize]:
        self._pending += data.decode(errors="replace")
        while self._pending.strip():
            text = self._pending.lstrip()
            if len(text) > _MAX_RESIZE:  # no size is this long: garbage, dropped
                self._pending = ""
                return
            try:
                value, end = self._json.raw_decode(text)
            except (json.JSONDecodeError, RecursionError):
                self._pending = text  # an object cut by a frame boundary waits for the rest
                return
            self._pending = text[end:]
            if isinstance(value, dict):
                width, height = value.get("Width"), value.get("Height")
                if _dimension(width) and _dimension(height):
                    yield TerminalSize(width, height)
