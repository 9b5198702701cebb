"""The price check of `core.money.charges`: a charge more than 10% away from list price times an
instance's life is told when a billing read first finds it (not at every hourly read),
again if it comes back after it went away, and never before billing has reached the end
of an ended instance's life."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.money.charges import new_differences

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _row(ended: datetime | None = None) -> MappingRow:
    state = MappingState.TERMINATED if ended else MappingState.RUNNING
    return MappingRow(
        "uid", "ml", "p", state, T0, T0, instance_id="i", cost_per_hr=1.0, ended_at=ended
    )


def _hours(count: int) -> datetime:
    return T0 + timedelta(hours=count)


def test_a_difference_is_told_when_found_then_not_while_it_stays() -> None:
    row = _row()
    assert new_differences([row], {}, None, {"uid": 1.0}, _hours(1)) == []
    (found,) = new_differences([row], {"uid": 1.0}, _hours(1), {"uid": 2.5}, _hours(2))
    assert (found.charged_usd, found.list_usd) == (2.5, 2.0)
    assert new_differences([row], {"uid": 2.5}, _hours(2), {"uid": 4.0}, _hours(3)) == []


def test_a_difference_that_went_away_and_came_back_is_told_again() -> None:
    row = _row()
    assert new_differences([row], {"uid": 2.5}, _hours(2), {"uid": 3.05}, _hours(3)) == []
    assert len(new_differences([row], {"uid": 3.05}, _hours(3), {"uid": 5.0}, _hours(4))) == 1


def test_an_ended_life_is_judged_only_once_billing_reached_its_end() -> None:
    row = _row(ended=_hours(2) + timedelta(minutes=30))
    assert new_differences([row], {}, None, {"uid": 0.5}, _hours(2)) == []
    (found,) = new_differences([row], {"uid": 0.5}, _hours(2), {"uid": 0.6}, _hours(3))
    assert found.list_usd == 2.5


def test_a_difference_below_a_cent_is_rounding_not_a_wrong_price() -> None:
    """A pod that lived seconds lists at $0.004; a charge of $0 is not worth an Event
    saying "charged $0.00 ... list price $0.00"."""
    row = MappingRow(
        "uid",
        "ml",
        "p",
        MappingState.TERMINATED,
        T0,
        T0,
        instance_id="i",
        cost_per_hr=0.49,
        ended_at=T0 + timedelta(seconds=30),
    )
    assert new_differences([row], {}, None, {"uid": 0.0}, _hours(1)) == []
    (found,) = new_differences([row], {}, None, {"uid": 0.02}, _hours(1))
    assert "$0.02" in found.message() and "$0.00" in found.message()
