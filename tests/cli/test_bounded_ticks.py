"""Bounded ticks: a tick ends by its deadline however slowly RunPod answers,
the creates it could not start wait for the next tick, and a rate-limited list ends the
tick cleanly as "skipped, rate limited" (exit 0 with --once), without waiting out a long
Retry-After."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from reconciler.demo.sandbox import Sandbox
from tests.cli.sync_once import sync_once


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        yield sandbox


def sync(box: Sandbox, *args: str) -> tuple[int, dict[str, object], float]:
    started = time.monotonic()
    result = sync_once(box, "--output", "json", *args)
    return result.exit_code, json.loads(result.stdout), time.monotonic() - started


def test_hung_creates_end_the_tick_by_its_deadline(box: Sandbox) -> None:
    for index in range(6):
        box.add_pod(f"p{index}")
    box.runpod_sim.faults.create_then_hang(count=6, seconds=4)
    code, report, seconds = sync(box, "--tick-deadline", "2")
    # Without the deadline: six creates one after another, four seconds each.
    assert seconds < 3.5, report
    assert code == 0 and report["ok"] is True
    assert report["deferred_creates"] == 5
    # The one create that timed out is in doubt, the rest were never sent.
    creates = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods")]
    assert len(creates) == 1


def test_a_rate_limited_list_is_a_clean_skipped_tick(box: Sandbox) -> None:
    box.add_pod("p")
    box.runpod_sim.faults.inject("GET", "/v2/pods", 429, count=1, retry_after=30)
    code, report, seconds = sync(box)
    assert code == 0, report
    assert report["ok"] is True and report["errors"] == []
    assert report["skipped"] == "skipped, rate limited by RunPod (retry after 30 s)"
    assert seconds < 5  # did not wait out the 30 s
    assert box.owned_instances() == []
    code, report, _ = sync(box)
    assert code == 0 and report["skipped"] is None
    assert len(box.owned_instances()) == 1


def test_the_skipped_tick_says_so_in_the_table(box: Sandbox) -> None:
    box.runpod_sim.faults.inject("GET", "/v2/pods", 429, count=1, retry_after=30)
    result = sync_once(box)
    assert result.exit_code == 0
    assert "ok (skipped, rate limited by RunPod (retry after 30 s))" in result.stdout
