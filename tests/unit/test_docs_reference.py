"""The reference pages under docs/reference/ are the code's own account of itself: each
generated page is what `python -m reconciler.docsgen` writes from the code now, and the
code has no flag, annotation, reason or metric that the pages do not name (checked
against the code directly, not only through the generator)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click

from reconciler.app import main
from reconciler.docsgen import annotation_catalogue, reasons
from reconciler.docsgen.pages import REGENERATE, generate, stale
from reconciler.runtime.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def test_the_generated_pages_are_current() -> None:
    pages = stale(ROOT)
    assert pages == [], (
        f"stale reference pages {pages}: run `{REGENERATE}` from the repository's root and "
        "commit what it writes (docs/development.md, Writing the docs)"
    )


def test_every_flag_of_every_command_is_on_the_commands_page() -> None:
    page = (REFERENCE / "commands.md").read_text()
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## |\Z)", page, re.M | re.S))

    def check(command: click.Command, path: str) -> None:
        assert path in sections, f"{path} has no section in docs/reference/commands.md"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for flag in (*param.opts, *param.secondary_opts):
                    assert f"`{flag}`" in sections[path], f"{path} {flag} is not documented"
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                check(sub, f"{path} {name}")

    check(main, "reconciler")


def test_every_annotation_the_code_names_is_catalogued() -> None:
    named = set()
    for file in (ROOT / "reconciler").rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named.update(re.findall(r"^runpod\.io/[A-Za-z0-9.-]+$", node.value))
    missing = named - annotation_catalogue.every_name()
    assert not missing, f"add {sorted(missing)} to reconciler/docsgen/annotation_catalogue.py"
    page = (REFERENCE / "annotations.md").read_text()
    assert [name for name in sorted(named) if f"`{name}`" not in page] == []


def test_every_pod_and_event_reason_is_explained() -> None:
    assert reasons.missing() == [], "explain them in reconciler/docsgen/reasons.py"


def test_every_exported_metric_is_on_the_metrics_page() -> None:
    page = (REFERENCE / "metrics.md").read_text()
    # What a scrape shows: a counter's samples carry _total, its family's name does not.
    scraped = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in Metrics().registry.collect()
    }
    shown = set(re.findall(r"^\| `(reconciler_\w+)`", page, re.M))
    assert scraped and scraped == shown, sorted(scraped ^ shown)


def test_the_pages_say_they_are_generated_and_how() -> None:
    for path, text in generate(ROOT).items():
        assert text.startswith("<!-- Generated from the code by"), path
        assert REGENERATE in text.splitlines()[0], path
