"""The performance page's figures come from runs of the code as it is. The fast tier's
count of tests is the tier's own, within 15 % (re-measure the tier and update the page
when it grows past that), and its date is given. Every benchmark's figures are made from
its committed run record (`docs/reference/perf/`, by `python -m reconciler.docsgen`,
which tests/unit/docsgen/test_docs_reference.py holds to the page), and each record is of the
benchmark's source as it is."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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


RECORDS = ROOT / "docs" / "reference" / "perf"
PERF = ROOT / "tests" / "perf"


def perf_record() -> ModuleType:
    """The benchmarks' record keeper (tests/perf is a folder of scripts, not a package:
    its benchmarks import it by its name, as here)."""
    if str(PERF) not in sys.path:
        sys.path.append(str(PERF))
    return importlib.import_module("perf_record")


def test_each_benchmark_has_its_record_and_its_figures_on_the_page() -> None:
    benches = set(perf_record().SOURCES)
    blocks = set(re.findall(r"<!-- perf: (\w+) -->", PAGE.read_text()))
    assert blocks == benches, (
        f"the page shows {sorted(blocks)}, the benchmarks are {sorted(benches)}"
    )
    recorded = {path.stem for path in RECORDS.glob("*.json")}
    assert recorded == benches, f"records {sorted(recorded)}, benchmarks {sorted(benches)}"


def test_each_record_is_of_its_benchmarks_source_as_it_is() -> None:
    """A benchmark changed since its run was recorded measures something else now: its
    figures on the page are of older code until it runs again."""
    keeper = perf_record()
    for path in sorted(RECORDS.glob("*.json")):
        record = json.loads(path.read_text())
        assert record["bench"] == path.stem
        assert record["source_digest"] == keeper.digest(path.stem), (
            f"{path.relative_to(ROOT)} is of an older {' or '.join(keeper.SOURCES[path.stem])}: "
            f"run `{record['command']}` again, then `python -m reconciler.docsgen`"
        )
