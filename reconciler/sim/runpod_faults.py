"""Faults a test asks the simulated RunPod for: answers it must survive.

- `inject`: the next matching calls answer a status (429 with `Retry-After`);
- `create_then_fail` / `create_then_hang`: a create makes its resource, then answers
  5xx or stalls, so the client cannot know it was made;
- `delete_keeps_billing` (pods), `cluster_delete_keeps_billing`,
  `volume_delete_keeps_billing`: a DELETE answers 204 and hides the resource, which goes
  on billing: the leak the reconciler audits for. A later DELETE of the id really ends it.
"""

from __future__ import annotations

import fnmatch
import threading
from collections import deque
from dataclasses import dataclass

from reconciler.sim.runpod_http import Reply
from reconciler.sim.runpod_validate import Problem


@dataclass
class _StatusFault:
    method: str
    path_pattern: str
    status: int
    count: int
    retry_after: int


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

    def inject(
        self, method: str, path_pattern: str, status: int, count: int = 1, *, retry_after: int = 5
    ) -> None:
        """The next `count` matching calls answer `status`; `path_pattern` is a glob."""
        with self._lock:
            fault = _StatusFault(method.upper(), path_pattern, status, count, retry_after)
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

    # Used by the routes

    def raise_injected(self, method: str, path: str) -> None:
        for fault in self._status:
            if fault.method == method and fnmatch.fnmatchcase(path, fault.path_pattern):
                fault.count -= 1
                if fault.count <= 0:
                    self._status.remove(fault)
                headers = {"Retry-After": str(fault.retry_after)} if fault.status == 429 else {}
                raise Problem(fault.status, "injected fault", headers=headers)

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
