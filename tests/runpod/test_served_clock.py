"""RunPod's time as the reconciler measures graces on it (`adapters/runpod/served_clock.py`):
the Date of RunPod's answers, whole seconds, carried on by the monotonic clock between
answers; a later Date is a better bound, one far behind means a clock moved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.adapters.runpod.served_clock import ServedClock

T0 = datetime(2026, 12, 7, 5, tzinfo=UTC)


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_nothing_before_the_first_dated_answer() -> None:
    clock = ServedClock(Monotonic())
    clock.heard(None)
    assert clock.now() is None


def test_the_date_is_carried_on_by_the_monotonic_clock() -> None:
    mono = Monotonic()
    clock = ServedClock(mono)
    clock.heard(T0)
    mono.now += 90.5
    assert clock.now() == T0 + timedelta(seconds=90.5)


def test_a_date_cut_to_the_second_does_not_move_it_back() -> None:
    mono = Monotonic()
    clock = ServedClock(mono)
    clock.heard(T0 + timedelta(seconds=0.4))  # as if RunPod had fractions
    mono.now += 10.8
    clock.heard(T0 + timedelta(seconds=11))  # 11.2 s carried on; Date says 11
    assert clock.now() == T0 + timedelta(seconds=11.2)


def test_a_later_date_is_the_better_bound() -> None:
    mono = Monotonic()
    clock = ServedClock(mono)
    clock.heard(T0)  # the moment was T0 + 0.9, cut to T0
    mono.now += 5.2
    clock.heard(T0 + timedelta(seconds=6))
    assert clock.now() == T0 + timedelta(seconds=6)


def test_a_date_far_behind_is_taken_again() -> None:
    """The monotonic clock ran on while the process was suspended, say: RunPod's Date
    is the truth."""
    mono = Monotonic()
    clock = ServedClock(mono)
    clock.heard(T0)
    mono.now += 100
    clock.heard(T0 + timedelta(seconds=60))
    assert clock.now() == T0 + timedelta(seconds=60)
