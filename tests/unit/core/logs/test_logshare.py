"""The log reads' share of RunPod's quota (`core.logs.quota_share`): each window allows `share`
of its quota over its length, never its last requests, and the refusal says which
window and when to try again; with no header heard yet, a minute of 60 is assumed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.capacity.pacing import Window
from reconciler.core.logs.quota_share import KEEP_FREE, refusal

MINUTE = Window("minute", remaining=60, reset_in=30.0, quota=60, length=60.0)
HOUR = Window("hour", remaining=3000, reset_in=1800.0, quota=3000, length=3600.0)


def test_each_window_allows_its_share() -> None:
    assert refusal([MINUTE, HOUR], 0.2, [100.0] * 11, 110.0) is None
    refused = refusal([MINUTE, HOUR], 0.2, [100.0] * 12, 110.0)
    assert refused is not None and refused.window == "minute" and refused.allowed == 12
    assert refused.retry_in == 50.0
    assert "12 RunPod requests a minute" in refused.message(0.2)
    assert "--log-read-share" in refused.message(0.2) and "try again in 50 s" in refused.message(
        0.2
    )
    assert refusal([MINUTE, HOUR], 0.2, [0.0] * 12, 110.0) is None  # older than the minute


def test_the_last_requests_of_a_window_are_never_taken() -> None:
    nearly_spent = Window("minute", remaining=KEEP_FREE, reset_in=7.0, quota=60, length=60.0)
    refused = refusal([nearly_spent], 0.2, [], 0.0)
    assert refused is not None and refused.retry_in == 7.0


def test_without_headers_a_minute_of_sixty_is_assumed() -> None:
    assert refusal([], 0.1, [0.0] * 5, 1.0) is None
    assert refusal([], 0.1, [0.0] * 6, 1.0) is not None


@given(
    share=st.floats(0.01, 0.5),
    reads=st.lists(st.floats(0, 120), max_size=100),
)
def test_never_more_than_the_share_in_any_window(share: float, reads: list[float]) -> None:
    kept: list[float] = []
    for now in sorted(reads):
        if refusal([MINUTE], share, kept, now) is None:
            kept.append(now)
    for now in kept:
        assert len([t for t in kept if 0 <= now - t < 60]) <= int(60 * share)
