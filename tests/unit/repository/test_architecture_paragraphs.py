"""No paragraph of the architecture page runs over 25 lines: a wall of text is where a
reader loses the rule they came for. A paragraph is a run of non-blank lines outside
fenced code blocks and tables; a list item starts a new one (it is a block of its own on
the page), so a list of short items is not one long paragraph.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "architecture.md"
LONGEST = 25

_ITEM = re.compile(r"^\s*(?:[-*] |\d+\. )")


def paragraphs(text: str) -> list[tuple[int, int]]:
    """Each paragraph as (its first line's number, its length in lines)."""
    found: list[tuple[int, int]] = []
    start, length, fenced = 0, 0, False

    def close() -> None:
        nonlocal length
        if length:
            found.append((start, length))
        length = 0

    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            close()
            continue
        if fenced or not line.strip() or line.lstrip().startswith("|"):
            close()
            continue
        if _ITEM.match(line):
            close()
        if not length:
            start = number
        length += 1
    close()
    return found


def too_long(text: str) -> list[str]:
    lines = text.splitlines()
    return [
        f"line {start}: {length} lines ({lines[start - 1].strip()[:60]}...)"
        for start, length in paragraphs(text)
        if length > LONGEST
    ]


def test_no_paragraph_is_over_25_lines() -> None:
    assert too_long(PAGE.read_text()) == []


def test_paragraphs_are_told_apart_by_blank_lines_items_code_and_tables() -> None:
    text = "a\nb\n\nc\n- d\n  e\n1. f\n```\ng\n\nh\n```\n| i |\n| j |\nk\n"
    assert paragraphs(text) == [(1, 2), (4, 1), (5, 2), (7, 1), (15, 1)]


def test_a_long_paragraph_is_caught() -> None:
    text = PAGE.read_text()
    joined = text.replace("\n\nThe plans: `MarkClaimSelected`", "\nThe plans: `MarkClaimSelected`")
    assert joined != text
    assert any("lines (**Network volumes**" in problem for problem in too_long(joined))
