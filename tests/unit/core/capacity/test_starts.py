"""What counts as a start that does not finish (`core/capacity/starts.py`): RunPod's
system lines read for the CUDA requirement error, a GPU error and an image that cannot
be pulled (any other line decides nothing); the start timeout by RunPod's clock (an
unknown time decides nothing, 0 turns it off, a running instance is never late); and
the stock memory keeping a place that failed a start, whatever the catalog or a later
create says, until its time is up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.core.capacity.starts import StartFailure, classify, timed_out
from reconciler.core.capacity.stock import START_FAILED_MEMORY, StockMemory
from reconciler.core.domain import (
    Availability,
    Cloud,
    DataCenterStock,
    Instance,
    InstanceStatus,
    Runtime,
)

from ...conftest import build_gpu

T0 = datetime(2026, 12, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("line", "failure"),
    [
        (
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.6, "
            "please update your driver to a newer version",
            StartFailure.HOST_CUDA,
        ),
        (
            "nvidia-container-cli: initialization error: nvml error: driver/library "
            "version mismatch: unknown",
            StartFailure.HOST_GPU,
        ),
        (
            "error pulling image: pull access denied for acme/x, repository does not exist",
            StartFailure.IMAGE_PULL,
        ),
        ("Head ...: unauthorized: authentication required", StartFailure.IMAGE_PULL),
        ("pulling image acme/x:1", None),
        ("start container for acme/x:1: begin", None),
        ("container exited with code 3; restarting it", None),
    ],
)
def test_lines_that_say_a_start_cannot_succeed(line: str, failure: StartFailure | None) -> None:
    assert classify(line) is failure


def _instance(status: InstanceStatus, runtime: bool = False) -> Instance:
    return Instance(
        "abc",
        "p",
        status,
        created_at=T0,
        runtime=Runtime(uptime_seconds=1) if runtime else None,
    )


def test_the_timeout_counts_by_runpods_clock() -> None:
    starting = _instance(InstanceStatus.STARTING)
    assert not timed_out(starting, T0 + timedelta(seconds=599), 600)
    assert timed_out(starting, T0 + timedelta(seconds=600), 600)
    assert not timed_out(starting, None, 600)  # RunPod said no time: nothing decided
    assert not timed_out(starting, T0 + timedelta(days=1), 0)  # turned off
    assert timed_out(_instance(InstanceStatus.RUNNING), T0 + timedelta(hours=1), 600)
    assert not timed_out(_instance(InstanceStatus.RUNNING, True), T0 + timedelta(hours=1), 600)


def test_a_place_that_failed_a_start_is_kept_out_until_its_time_is_up() -> None:
    memory = StockMemory()
    memory.start_failed("NVIDIA L40S", "US-TX-3", T0)
    place = ("NVIDIA L40S", Cloud.SECURE, "US-TX-3")
    assert place in memory.active(T0)
    memory.accepted("NVIDIA L40S", Cloud.SECURE)  # a create elsewhere went through
    stocked = build_gpu(
        "NVIDIA L40S", datacenters={"US-TX-3": Availability.HIGH}, availability=Availability.HIGH
    )
    assert stocked.datacenters == (DataCenterStock("US-TX-3", Availability.HIGH),)
    memory.catalog_seen([stocked], T0 + timedelta(seconds=1), Cloud.SECURE)  # stock is back
    assert place in memory.active(T0 + START_FAILED_MEMORY - timedelta(seconds=1))
    assert place not in memory.active(T0 + START_FAILED_MEMORY)
