"""`core.money.hourly_cap`: the one comparison of a spend with its cap, at the boundary.
Spends are sums of hourly prices in binary floats, so a sum equal to the cap in decimal
may pass it by a rounding error; that sum is within the cap, a cent more is not."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.money.hourly_cap import TOLERANCE_USD, within_cap


def test_a_spend_of_exactly_the_cap_is_within_it() -> None:
    assert within_cap(1.0, 1.0)
    assert within_cap(0.0, 0.0)


def test_prices_that_sum_to_the_cap_in_decimal_are_within_it() -> None:
    assert 0.1 + 0.2 > 0.3  # the binary sum passes the decimal cap by a rounding error
    assert within_cap(0.1 + 0.2, 0.3)
    assert within_cap(0.34 + 0.79, 1.13)


def test_a_spend_above_the_cap_is_not_within_it() -> None:
    assert not within_cap(1.01, 1.0)
    assert not within_cap(1.0 + 10 * TOLERANCE_USD, 1.0)
    assert not within_cap(0.0001, 0.0)  # a zero cap lets nothing run


@given(st.lists(st.integers(min_value=1, max_value=100_000), min_size=1, max_size=1000))
def test_any_thousand_listed_prices_fit_a_cap_of_their_decimal_sum(
    ten_thousandths: list[int],
) -> None:
    """Prices with four decimals (RunPod's), up to $10/h each, added as floats in order."""
    prices = [float(Decimal(c) / 10_000) for c in ten_thousandths]
    cap = float(sum(Decimal(c) / 10_000 for c in ten_thousandths))
    assert within_cap(sum(prices), cap)
    assert not within_cap(sum(prices) + 0.0001, cap)
