"""The reasons are a closed set: each has one CamelCase value, and the README names every
reason a user can meet in `kubectl get pod`."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.core.reasons import Notice, PodReason

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_reason_is_one_camel_case_word_used_once() -> None:
    values = [reason.value for reason in (*PodReason, *Notice)]
    assert len(values) == len(set(values))
    assert all(re.fullmatch(r"[A-Z][A-Za-z]+", value) for value in values)


def test_the_readme_names_every_pod_reason() -> None:
    text = README.read_text()
    section = text[text.index("Reasons you may see in `kubectl get pod`") :]
    section = section[: section.index("\n## ")]
    assert [r.value for r in PodReason if f"`{r.value}`" not in section] == []


def test_an_unknown_stored_reason_parses_as_none() -> None:
    assert PodReason.parse("BudgetExceeded") is PodReason.BUDGET_EXCEEDED
    assert PodReason.parse("FromANewerVersion") is None
    assert PodReason.parse(None) is None
