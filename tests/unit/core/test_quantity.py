"""Canonical Kubernetes quantities: the reconciler writes what the API server stores.
Checked against known canonical forms and, for any quantity, against the simulator's
independent implementation of the same apimachinery rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.quantity import canonical_quantity
from reconciler.sim.kube.quantity import canonical


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("4000", "4k"),
        ("16Ti", "16Ti"),
        ("16384Gi", "16Ti"),
        ("1.5Gi", "1536Mi"),
        ("0.5", "500m"),
        ("1500", "1500"),
        ("1e3", "1e3"),
        ("512", "512"),
        ("100m", "100m"),
        ("0.0000000001", "1n"),
        ("12345000", "12345k"),
        ("0", "0"),
        ("1.1Gi", "1181116006400m"),
    ],
)
def test_known_canonical_forms(text: str, stored: str) -> None:
    assert canonical_quantity(text) == stored


@pytest.mark.parametrize("text", ["", "four", "1.2.3", "4 k", "1Kb", "Gi"])
def test_what_is_not_a_quantity_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        canonical_quantity(text)


@given(
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=0, max_value=3),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3", "e-2"]),
)
def test_agrees_with_the_simulator(whole: int, decimals: int, suffix: str) -> None:
    number = str(whole) if not decimals else f"{whole / 10**decimals:.{decimals}f}"
    assert canonical_quantity(number + suffix) == canonical(number + suffix)
