"""The committed record of a benchmark's run, from which the performance page is made.

Each benchmark's `--json PATH` writes its figures inside a record that says what ran
them: the date, the commit, the machine's load before and after, the machine, the
command line, and a digest of the benchmark's own source (the benchmark and the world
modules it builds). `docs/reference/perf/<bench>.json` holds the run the page shows;
`python -m reconciler.docsgen` makes the page's figures from those files, and
`tests/deploy/test_performance_page.py` fails when a record's digest is not of the
benchmark's source as it is, so a benchmark changed since its figures were taken asks
for a new run.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = ROOT / "docs" / "reference" / "perf"

SOURCES: dict[str, tuple[str, ...]] = {
    "scale": ("tests/perf/bench_scale.py", "tests/perf/scale_world.py"),
    "quota": (
        "tests/perf/bench_quota.py",
        "tests/perf/quota_world.py",
        "tests/perf/scale_world.py",
    ),
    "starts": ("tests/perf/bench_starts.py", "tests/perf/start_world.py"),
    "http": ("tests/perf/bench_http.py", "tests/perf/scale_world.py"),
    "tunnels": ("tests/perf/bench_tunnels.py",),
    "image": ("tests/image/measure.py", "tests/image/engine.py", "Dockerfile"),
}
"""Each benchmark's own source: what its figures stop being of when it changes."""

COMMANDS = {"image": "python -m tests.image.measure"}
"""How a benchmark is run, where not as `python <its first source>`."""


def digest(bench: str, root: Path = ROOT) -> str:
    found = hashlib.sha256()
    for name in SOURCES[bench]:
        found.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return found.hexdigest()[:16]


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


@dataclass
class Run:
    """A benchmark's run, begun: when, and the load it began at."""

    bench: str
    argv: Sequence[str] | None = None
    """The benchmark's arguments (its command line's when None)."""
    began: float = field(default_factory=time.time)
    load_before: tuple[float, float, float] = field(default_factory=os.getloadavg)
    commit: str = field(default_factory=_commit)
    """The code that runs: the commit checked out when the run began."""

    def program(self) -> str:
        return COMMANDS.get(self.bench, f"python {SOURCES[self.bench][0]}")

    def record(self, figures: dict[str, Any]) -> dict[str, Any]:
        arguments = sys.argv[1:] if self.argv is None else list(self.argv)
        return {
            "bench": self.bench,
            "measured": time.strftime("%Y-%m-%d", time.gmtime(self.began)),
            "commit": self.commit,
            "source_digest": digest(self.bench),
            "command": " ".join([self.program(), *arguments]),
            "minutes": round((time.time() - self.began) / 60, 1),
            "load_before": [round(x, 1) for x in self.load_before],
            "load_after": [round(x, 1) for x in os.getloadavg()],
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "system": f"{platform.system()} {platform.machine()}",
            },
            "figures": figures,
        }

    def write(self, path: Path, figures: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.record(figures), indent=1, sort_keys=False) + "\n")
