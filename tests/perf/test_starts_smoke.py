"""The start-replacement scenario (`start_world`: 30 % of the hosts fail their start, by
CUDA, GPU or hang): every pod runs within two start timeouts, no failed instance bills
past the first tick after its failure, each replacement costs a DELETE, a GET by id
(gone only once RunPod says so) and a POST, and a steady tick afterwards sends RunPod
its one list."""

from __future__ import annotations

import pytest
from bench_starts import report
from start_world import START_TIMEOUT, TICK, run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [7, 11])
def test_thirty_percent_of_hosts_failing_their_start(seed: int) -> None:
    figures = run(pods=12, seed=seed)
    print("\n".join(report(figures)))
    assert len(figures.running_after) == figures.pods
    assert max(figures.running_after.values()) <= 2 * START_TIMEOUT
    assert figures.replacements >= 3  # each failing pool failed someone
    assert max(figures.ticks_past_failure.values()) <= 1  # the next tick deleted each
    assert max(figures.billed_past_failure.values()) <= 2 * TICK
    assert figures.requests["DELETE"] == figures.replacements
    assert figures.requests["POST"] == figures.pods + figures.replacements
    assert figures.reads_by_id == figures.replacements  # gone once RunPod said so
    assert figures.steady == ["GET /v2/pods"]
