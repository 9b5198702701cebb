"""The reasons are a closed set: each has one CamelCase value, and the reasons page of the
docs names every reason a user can meet in `kubectl get pod` or an Event."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.core.reasons import Notice, PodReason

REASONS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "reasons.md"


def test_every_reason_is_one_camel_case_word_used_once() -> None:
    values = [reason.value for reason in (*PodReason, *Notice)]
    assert len(values) == len(set(values))
    assert all(re.fullmatch(r"[A-Z][A-Za-z]+", value) for value in values)


def test_the_reasons_page_names_every_reason() -> None:
    text = REASONS_PAGE.read_text()
    assert [r.value for r in (*PodReason, *Notice) if f"`{r.value}`" not in text] == []


def test_an_unknown_stored_reason_parses_as_none() -> None:
    assert PodReason.parse("BudgetExceeded") is PodReason.BUDGET_EXCEEDED
    assert PodReason.parse("FromANewerVersion") is None
    assert PodReason.parse(None) is None
