"""Named points between two side effects where a test can make the process die.

`RECONCILER_CRASH_AT="after-create:2"` kills the process (os._exit, no cleanup, like
SIGKILL) the 2nd time the executor passes `after-create`. Several points may be armed
at once, comma-separated. Unarmed, `reached()` costs one dict lookup on an empty dict.
In-process tests arm a point with `arm()` and a `die` that raises `SimulatedCrash`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

ENV_VAR = "RECONCILER_CRASH_AT"
CRASH_EXIT_CODE = 137

POINTS = (
    "after-intent",  # the creating row is committed, RunPod not called yet
    "after-create",  # RunPod created the instance, its id is not recorded yet
    "after-id-write",  # the id is noted (committed with a later write), no Event yet
    "after-terminating",  # the terminating row is committed, DELETE not sent yet
    "after-delete",  # DELETE answered, nothing recorded yet
    "after-status-patch",  # the pod status is patched, its fingerprint not recorded
    "after-finalize",  # the pod object is deleted, the row not updated
    "after-registry-intent",  # a credential create's journal row committed, POST not sent
    "after-registry-create",  # RunPod stored the credential, its id known only here
    "after-registry-unused",  # a credential delete's journal row committed, DELETE not sent
    "after-registry-delete",  # DELETE answered, its journal row not closed
    "after-cluster-intent",  # a gang's creating row is committed, POST /v2/clusters not sent
    "after-cluster-create",  # RunPod made the cluster, its id is known only here
    "after-cluster-deleting",  # a cluster's deleting row is committed, DELETE not sent
    "after-cluster-delete",  # DELETE /v2/clusters answered, nothing recorded yet
    "after-volume-intent",  # a volume create's journal row committed, POST not sent
    "after-volume-create",  # RunPod made the volume, its PV not yet
    "after-volume-unused",  # a volume delete's journal row committed, DELETE not sent
    "after-volume-delete",  # DELETE answered, the released PV not deleted yet
)


class SimulatedCrash(BaseException):
    """Raised instead of dying in-process; a BaseException so no handler swallows it."""


def _exit() -> None:
    os._exit(CRASH_EXIT_CODE)


_armed: dict[str, int] = {}
_die: Callable[[], None] = _exit


def arm(spec: str, die: Callable[[], None] = _exit) -> None:
    """Arm points from a spec like "after-create:1,after-delete:3" (empty disarms)."""
    global _die
    _armed.clear()
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, count = item.partition(":")
        if name not in POINTS:
            known = ", ".join(POINTS)
            raise ValueError(f"unknown crash point {name!r}; known: {known}")
        _armed[name] = int(count or 1)
    _die = die


def reached(name: str) -> None:
    if not _armed or name not in _armed:
        return
    _armed[name] -= 1
    if _armed[name] == 0:
        del _armed[name]
        _die()


arm(os.environ.get(ENV_VAR, ""))
