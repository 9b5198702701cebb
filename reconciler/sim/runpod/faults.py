"""Faults a test asks the simulated RunPod for: answers it must survive.

- `inject`: the next matching calls answer a status (429 with `Retry-After`);
- `create_then_fail` / `create_then_hang`: a create makes its resource, then answers
  5xx or stalls, so the client cannot know it was made;
- `delete_keeps_billing` (pods), `cluster_delete_keeps_billing`,
  `volume_delete_keeps_billing`: a DELETE answers 204 and hides the resource, which goes
  on billing: the leak the reconciler audits for. A later DELETE of the id really ends it.

Answers a broken or inconsistent RunPod gives (its list served from a replica or cache
that disagrees with its record; a proxy that stalls or bloats an answer), as they look
on the wire. Each applies to the next `count` 200 answers of one exact path; a read by
id (`/v2/pods/{id}`) always tells the truth:
- `repeat_entries`: the list shows each entry `times` times;
- `list_env`: the listed entries (all, or those `ids`) show env values changed (None:
  the variable left out), as a tag swapped or missing;
- `list_fields`: the listed entries (all, or those `ids`) show these fields instead
  (a `status` of ERROR or TERMINATED);
- `extra_entries`: the list also shows these raw entries (ids `.`, `..`, odd forms);
- `create_answers`: a create makes its resource and answers with other fields (an odd id);
- `trickle`: the body goes out one byte at a time, each after `seconds_per_byte` of the
  simulator's clock;
- `pad`: the body is padded (a `padding` field) to `size` bytes, sent in pieces as they
  are made, so the simulator never holds it; `chunked` sends no Content-Length.
"""

from __future__ import annotations

import fnmatch
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.sim.runpod.http import Reply, Wire
from reconciler.sim.runpod.validate import Problem


@dataclass
class _StatusFault:
    method: str
    path_pattern: str
    status: int
    count: int
    retry_after: int
    detail: str = "injected fault"


@dataclass
class CountedFault:
    count: int

    def spend(self) -> bool:
        """True while the fault still applies, using up one of its occurrences."""
        if self.count <= 0:
            return False
        self.count -= 1
        return True


@dataclass
class _CreateFault:
    count: int
    status: int = 500
    hang: float = 0.0


@dataclass
class _ListFault:
    path: str
    count: int
    repeat: int = 1
    env: Mapping[str, str | None] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)
    ids: frozenset[str] | None = None
    extra: Sequence[Mapping[str, Any]] = ()


@dataclass
class _WireFault:
    path: str
    count: int
    seconds_per_byte: float = 0.0
    size: int = 0
    chunked: bool = False


class Faults:
    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._status: list[_StatusFault] = []
            self._creates: deque[_CreateFault] = deque()
            self.pod_deletes = CountedFault(0)
            self.cluster_deletes = CountedFault(0)
            self.volume_deletes = CountedFault(0)
            self._lists: list[_ListFault] = []
            self._wires: list[_WireFault] = []
            self._creates_shown: list[_ListFault] = []
            self.wires_sent: list[Wire] = []
            """The answers the wire faults shaped, with the bytes each really sent."""

    def inject(
        self,
        method: str,
        path_pattern: str,
        status: int,
        count: int = 1,
        *,
        retry_after: int = 5,
        detail: str = "injected fault",
    ) -> None:
        """The next `count` matching calls answer `status` with this problem `detail`;
        `path_pattern` is a glob."""
        with self._lock:
            fault = _StatusFault(method.upper(), path_pattern, status, count, retry_after, detail)
            self._status.append(fault)

    def create_then_fail(self, count: int = 1, status: int = 500) -> None:
        with self._lock:
            self._creates.append(_CreateFault(count, status=status))

    def create_then_hang(self, count: int = 1, seconds: float = 2.0) -> None:
        """The next creates make the pod, then stall `seconds` of real time before answering."""
        with self._lock:
            self._creates.append(_CreateFault(count, status=201, hang=seconds))

    def delete_keeps_billing(self, count: int = 1) -> None:
        """The next `count` pod DELETEs answer 204 and hide the pod, which goes on billing."""
        with self._lock:
            self.pod_deletes = CountedFault(count)

    def volume_delete_keeps_billing(self, count: int = 1) -> None:
        """The next `count` network-volume DELETEs answer 204 and hide the volume (404,
        not listed), which goes on billing; a later DELETE of the same id ends it."""
        with self._lock:
            self.volume_deletes = CountedFault(count)

    def cluster_delete_keeps_billing(self, count: int = 1) -> None:
        """The next `count` cluster DELETEs answer 204 and hide the cluster and its
        members, which go on billing; a later DELETE of the same id really ends it."""
        with self._lock:
            self.cluster_deletes = CountedFault(count)

    def repeat_entries(self, path: str = "/v2/pods", times: int = 2, count: int = 1) -> None:
        """The next `count` answers of the list at `path` show each entry `times` times."""
        with self._lock:
            self._lists.append(_ListFault(path, count, repeat=times))

    def list_env(
        self,
        env: Mapping[str, str | None],
        ids: Sequence[str] | None = None,
        path: str = "/v2/pods",
        count: int = 1,
    ) -> None:
        """The next `count` answers of the list show the entries `ids` (all: None) with
        these env values (None: the variable left out); their reads by id do not."""
        with self._lock:
            chosen = None if ids is None else frozenset(ids)
            self._lists.append(_ListFault(path, count, env=dict(env), ids=chosen))

    def list_fields(
        self,
        fields: Mapping[str, Any],
        ids: Sequence[str] | None = None,
        path: str = "/v2/pods",
        count: int = 1,
    ) -> None:
        """The next `count` answers of the list show the entries `ids` (all: None) with
        these fields; their reads by id do not."""
        with self._lock:
            chosen = None if ids is None else frozenset(ids)
            self._lists.append(_ListFault(path, count, fields=dict(fields), ids=chosen))

    def create_answers(
        self, fields: Mapping[str, Any], path: str = "/v2/pods", count: int = 1
    ) -> None:
        """The next `count` creates at `path` make their resource, and answer with these
        fields instead (an `id` of another form)."""
        with self._lock:
            self._creates_shown.append(_ListFault(path, count, fields=dict(fields)))

    def extra_entries(
        self, entries: Sequence[Mapping[str, Any]], path: str = "/v2/pods", count: int = 1
    ) -> None:
        """The next `count` answers of the list show these raw entries too."""
        with self._lock:
            self._lists.append(_ListFault(path, count, extra=list(entries)))

    def trickle(
        self, path: str = "/v2/pods", seconds_per_byte: float = 2.0, count: int = 1
    ) -> None:
        """The next `count` answers at `path` go out a byte at a time, each after
        `seconds_per_byte` of the simulator's clock."""
        with self._lock:
            self._wires.append(_WireFault(path, count, seconds_per_byte=seconds_per_byte))

    def pad(
        self, size: int, path: str = "/v2/pods", count: int = 1, *, chunked: bool = False
    ) -> None:
        """The next `count` answers at `path` are padded to `size` bytes; `chunked`: sent
        without a Content-Length."""
        with self._lock:
            self._wires.append(_WireFault(path, count, size=size, chunked=chunked))

    # Used by the routes

    def raise_injected(self, method: str, path: str) -> None:
        for fault in self._status:
            if fault.method == method and fnmatch.fnmatchcase(path, fault.path_pattern):
                fault.count -= 1
                if fault.count <= 0:
                    self._status.remove(fault)
                headers = {"Retry-After": str(fault.retry_after)} if fault.status == 429 else {}
                raise Problem(fault.status, fault.detail, headers=headers)

    def answer_created(self, created: Reply) -> Reply:
        """The answer to a create that made its resource, unless a fault loses it."""
        fault = self._creates[0] if self._creates else None
        if fault is None:
            return created
        fault.count -= 1
        if fault.count <= 0:
            self._creates.popleft()
        if fault.hang:
            created.hang = fault.hang
            return created
        raise Problem(fault.status, "upstream failure after the resource was created")

    def shape_answer(self, method: str, path: str, reply: Reply) -> Reply:
        """A 2xx answer as the faults for its path make it look: a create's fields (a
        POST), a list's entries and the wire (a GET)."""
        if reply.status >= 300 or not (self._lists or self._wires or self._creates_shown):
            return reply
        if method == "POST":
            for shown in _spent(self._creates_shown, path):
                reply.body = (
                    {**reply.body, **shown.fields} if isinstance(reply.body, dict) else reply.body
                )
            return reply
        if method != "GET":
            return reply
        for fault in _spent(self._lists, path):
            reply.body = _listed(reply.body, fault)
        for wire in _spent(self._wires, path):
            reply.wire = Wire(wire.seconds_per_byte, wire.size, wire.chunked)
            self.wires_sent.append(reply.wire)
        return reply


def _spent(faults: list[Any], path: str) -> list[Any]:
    """The faults for `path`, each using up one occurrence (gone when none is left)."""
    applying = [fault for fault in faults if fault.path == path]
    for fault in applying:
        fault.count -= 1
        if fault.count <= 0:
            faults.remove(fault)
    return applying


def _listed(body: Any, fault: _ListFault) -> Any:
    """The body with its list (its one list of objects) as the fault shows it."""
    if not isinstance(body, dict):
        return body
    key = next((k for k, v in body.items() if isinstance(v, list)), None)
    if key is None:
        return body
    entries = []
    for entry in body[key]:
        if isinstance(entry, dict) and (fault.ids is None or entry.get("id") in fault.ids):
            if fault.env:
                env = {**(entry.get("env") or {}), **fault.env}
                entry = {**entry, "env": {k: v for k, v in env.items() if v is not None}}
            entry = {**entry, **fault.fields}
        entries += [entry] * fault.repeat
    return {**body, key: entries + [dict(e) for e in fault.extra]}
