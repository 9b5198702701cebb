"""The performance page's figures for the fast tier come from a run of the code as it is:
the count of tests it gives is the tier's own, within 15 % (re-measure the tier and
update the page when it grows past that), and its date is given."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "performance.md"


def fast_tier_size() -> int:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    counted = re.search(r"^(\d+)/\d+ tests collected", done.stdout, re.M)
    assert counted is not None, done.stdout[-2000:]
    return int(counted.group(1))


def test_the_fast_tiers_figures_are_of_the_tier_as_it_is() -> None:
    section = PAGE.read_text().split("## The fast test tier", 1)[1].split("\n## ", 1)[0]
    stated = re.search(r"\*\*([\d ]+) tests\*\*", section)
    assert stated is not None and re.search(r"measured \d{4}-\d{2}-\d{2}", section), section
    claimed, actual = int(stated.group(1).replace(" ", "")), fast_tier_size()
    assert abs(claimed - actual) <= 0.15 * actual, (
        f"the page says {claimed} fast tests, the tier has {actual}: run "
        '`python -m pytest -m "not slow"` and update docs/reference/performance.md'
    )
