"""The docs step of the README's test command can fail: a broken link planted in a copy
of the site stops it. (`mkdocs build --strict --quiet` could not: with --quiet, strict
mode does not count the warnings it hides, mkdocs/mkdocs#4126.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def docs_step() -> str:
    """The README's test command's mkdocs step, as .ci/run reads the command."""
    text = (ROOT / "README.md").read_text()
    command = text.split("<!-- test-command -->", 1)[1].split("```sh\n", 1)[1].split("\n", 1)[0]
    (step,) = [s.strip() for s in command.split("&&") if "mkdocs build" in s]
    return step


def run_step(site: Path) -> subprocess.CompletedProcess[str]:
    assignments = dict(re.findall(r"(\w+)=(\S+)\s", docs_step()))
    argv = re.sub(r"^(\w+=\S+\s+)*", "", docs_step()).split()
    return subprocess.run(
        [str(Path(shutil.which(argv[0]) or argv[0])), *argv[1:], "--site-dir", str(site / "out")],
        cwd=site,
        env={**os.environ, **assignments},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def copy_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(ROOT / "docs", site / "docs")
    shutil.copy(ROOT / "mkdocs.yml", site / "mkdocs.yml")
    return site


def test_the_docs_step_passes_on_the_docs_as_they_are(tmp_path: Path) -> None:
    done = run_step(copy_site(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_docs_step_fails_on_a_planted_broken_link(tmp_path: Path) -> None:
    site = copy_site(tmp_path)
    page = site / "docs" / "index.md"
    page.write_text(page.read_text() + "\n[gone](no-such-page.md)\n")
    done = run_step(site)
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr + done.stdout
