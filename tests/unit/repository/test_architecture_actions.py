"""The architecture page's list of actions (§2, "The actions") names every member of
`reconciler.core.actions.BuiltinAction` and nothing else: an action added to the union without
a line on the page fails here, and so does a line for one that was removed or renamed.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

from reconciler.core import actions

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "architecture.md"


def listed(text: str) -> list[str]:
    """The first column of the table under "### The actions"."""
    start = text.index("### The actions")
    section = text[start : text.index("\n### ", start + 1)]
    return re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)


def in_union() -> set[str]:
    return {member.__name__ for member in typing.get_args(actions.BuiltinAction)}


def test_the_page_lists_every_action_once() -> None:
    names = listed(PAGE.read_text())
    assert sorted(set(names)) == sorted(names), "an action listed twice"
    assert set(names) == in_union()


def test_an_action_left_off_the_page_is_caught() -> None:
    text = PAGE.read_text()
    without = "\n".join(line for line in text.splitlines() if not line.startswith("| `Bind` |"))
    assert in_union() - set(listed(without)) == {"Bind"}
    stale = text.replace("| `Event` |", "| `Event` |\n| `Reboot` | x | y |", 1)
    assert set(listed(stale)) - in_union() == {"Reboot"}
