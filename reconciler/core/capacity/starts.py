"""Starts that do not finish: what RunPod's system lines say about a start that cannot
succeed, and when a start has taken too long.

RunPod keeps an instance whose container cannot start STARTING, and billing, for good:
nvidia-container-cli refusing an image whose CUDA requirement is above the host's driver,
a GPU the driver cannot initialise, a pull that never ends. So the reconciler judges:

- a start that cannot succeed **on that host** (`HOST_CUDA`, `HOST_GPU`, by RunPod's
  system lines, or `TIMEOUT`: not running `--start-timeout` after its create, by RunPod's
  own clock) is replaced on another GPU type or data center, up to `MAX_TRIES` places;
- a start that cannot succeed **anywhere** (`IMAGE_PULL`: an image that does not exist
  or that the registry refuses) is not tried host after host: the pod waits with
  `ErrImagePull` until its image is fixed, with no instance billing meanwhile.

Patterns are matched on the text of RunPod's system lines (the container runtime's own
error words, stable for years across Docker, containerd and the NVIDIA toolkit); a line
that matches none decides nothing.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.core.domain import Instance, InstanceStatus

MAX_TRIES = 3
"""Places a pod's instance may fail to start in before the pod fails."""


class StartFailure(enum.StrEnum):
    HOST_CUDA = "the host's CUDA driver is older than the image needs"
    HOST_GPU = "the host's GPU could not be initialised"
    TIMEOUT = "it was not running within --start-timeout"
    IMAGE_PULL = "its image cannot be pulled"

    @property
    def on_any_host(self) -> bool:
        """Whether another host would fail the same way (nothing to gain by moving)."""
        return self is StartFailure.IMAGE_PULL


_PATTERNS: tuple[tuple[re.Pattern[str], StartFailure], ...] = (
    (re.compile(r"requirement error: unsatisfied condition: cuda\s*>="), StartFailure.HOST_CUDA),
    (
        re.compile(
            r"nvidia-container-cli: (initialization|detection) error|nvml error|"
            r"no CUDA-capable device|NVIDIA-SMI has failed|Xid \d+"
        ),
        StartFailure.HOST_GPU,
    ),
    (
        re.compile(
            r"pull access denied|manifest unknown|repository does not exist|"
            r"unauthorized: authentication required|requested access to the resource is denied"
        ),
        StartFailure.IMAGE_PULL,
    ),
)


@dataclass(frozen=True)
class FailedStart:
    """What a system line said of an instance's start."""

    failure: StartFailure
    line: str


def classify(line: str) -> StartFailure | None:
    """What a RunPod system line says of a start; None when it says nothing final."""
    for pattern, failure in _PATTERNS:
        if pattern.search(line):
            return failure
    return None


def first_failure(lines: Iterable[str]) -> FailedStart | None:
    for line in lines:
        failure = classify(line)
        if failure is not None:
            return FailedStart(failure, line)
    return None


def is_starting(instance: Instance) -> bool:
    """From its create until its container runs (RUNNING without a runtime too)."""
    if instance.status in (InstanceStatus.PROVISIONING, InstanceStatus.STARTING):
        return True
    return instance.status is InstanceStatus.RUNNING and instance.runtime is None


def timed_out(instance: Instance, runpod_now: datetime | None, timeout: float) -> bool:
    """Whether the instance is still starting `timeout` seconds after its create, both
    times by RunPod's clock (its `createdAt`, the list's Date): never by ours, which
    may step. Unknown times decide nothing; 0 turns the timeout off."""
    if timeout <= 0 or runpod_now is None or instance.created_at is None:
        return False
    return is_starting(instance) and runpod_now - instance.created_at >= timedelta(seconds=timeout)


def place_of(instance: Instance) -> str:
    """Where an instance ran, as a pod's tried places name it: `GPU type@data center`."""
    offer = instance.gpu_type_id or instance.cpu_flavor_id or "?"
    return f"{offer}@{instance.datacenter_id or '?'}"


def tried_places(record: str | None) -> list[str]:
    """The places a row records its pod's instances failing to start in, oldest first."""
    return [place for place in (record or "").split(";") if place]


def with_place(record: str | None, place: str) -> str:
    return ";".join([*tried_places(record), place])
