"""Which pages are generated, from what, and whether the ones on disk are current."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reconciler.docsgen import annotation_catalogue, chart, commands, metrics, performance, reasons

REGENERATE = "python -m reconciler.docsgen"

HEADER = (
    "<!-- Generated from the code by `{command}`: do not edit by hand; "
    "change the code (or {source}) and run it again. -->\n\n"
)

# Each page: its path under the repository, where its text comes from, and its maker.
PAGES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "docs/reference/commands.md": ("the click commands' help", commands.page),
    "docs/reference/annotations.md": (
        "reconciler/docsgen/annotation_catalogue.py",
        annotation_catalogue.page,
    ),
    "docs/reference/reasons.md": ("reconciler/docsgen/reasons.py", reasons.page),
    "docs/reference/metrics.md": ("reconciler/runtime/process/metrics.py", metrics.page),
    "docs/reference/chart-values.md": (
        "the chart's values.yaml and values.schema.json",
        chart.page,
    ),
}


# Pages written by hand but for blocks made from data: each page and its maker, given the
# page's text as it is.
BLOCKS: dict[str, Callable[[Path, str], str]] = {
    "docs/reference/performance.md": performance.page,
}


def generate(root: Path) -> dict[str, str]:
    """Every generated page's text, by path relative to `root` (the repository)."""
    pages = {
        path: HEADER.format(command=REGENERATE, source=source) + make(root)
        for path, (source, make) in PAGES.items()
    }
    for path, fill in BLOCKS.items():
        pages[path] = fill(root, (root / path).read_text())
    return pages


def stale(root: Path) -> list[str]:
    """The generated pages whose file under `root` differs from what the code makes."""
    found = []
    for path, text in generate(root).items():
        file = root / path
        if not file.exists() or file.read_text() != text:
            found.append(path)
    return found


def write(root: Path) -> list[str]:
    """Writes every generated page that changed; returns their paths."""
    changed = stale(root)
    for path, text in generate(root).items():
        if path in changed:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
    return changed
