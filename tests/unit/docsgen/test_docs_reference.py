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
from reconciler.core.reasons import Notice, PodReason, VolumeNotice
from reconciler.docsgen import annotation_catalogue, reasons
from reconciler.docsgen.pages import BLOCKS, REGENERATE, generate, stale
from reconciler.runtime.process.metrics import Metrics

ROOT = Path(__file__).resolve().parents[3]
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
        if path in BLOCKS:  # written by hand but for its blocks, each saying so
            blocks = re.findall(r"<!-- perf: \w+ -->\n(.*)\n", text)
            assert blocks and all(REGENERATE in block for block in blocks), path
            continue
        assert text.startswith("<!-- Generated from the code by"), path
        assert REGENERATE in text.splitlines()[0], path


# The exec stream's closing Status (core/node/remotecommand.py): kubectl reads it to exit
# with the command's code; no pod or Event shows it.
EXEC_STATUS_REASONS = {"NonZeroExitCode", "ExitCode", "InternalError"}
EVENT_ENUMS = {"PodReason", "Notice", "VolumeNotice", "EventReason"}
RECORD = "kube.events.record"
"""How the code records an Event (`adapters/kube/events.py`)."""


def emitted_reasons() -> tuple[set[str], list[str], int]:
    """What the code can emit as a reason, found in the code itself: every string given as
    a `"reason"` of a status or condition, or as a container state's reason (`_Outcome`);
    and every Event recorded with a reason that is not a member of the reasons' enums
    (`file:line`, which must be none); and how many places record Events."""
    found: set[str] = set()
    loose: list[str] = []
    recorders = 0
    for file in sorted((ROOT / "reconciler").rglob("*.py")):
        if {"sim", "demo", "docsgen"} & set(file.relative_to(ROOT).parts):
            continue
        tree = ast.parse(file.read_text())
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name) and isinstance(node.value.value, str)
        }
        enum_typed = {
            arg.arg
            for arg in ast.walk(tree)
            if isinstance(arg, ast.arg)
            and arg.annotation is not None
            and ast.unparse(arg.annotation) in EVENT_ENUMS
        }

        def text(node: ast.expr, constants: dict[str, str] = constants) -> str | None:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return node.value
            if isinstance(node, ast.Name):
                return constants.get(node.id)
            return None

        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "reason":
                        found.add(text(value) or "")
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "_Outcome":
                if len(node.args) >= 3:
                    found.add(text(node.args[2]) or "")
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith(RECORD):
                recorders += 1
                reason = node.args[1]
                member = isinstance(reason, ast.Attribute) and reason.attr == "value"
                owner = reason.value if member else None  # type: ignore[union-attr]
                if not (
                    (isinstance(owner, ast.Attribute) and ast.unparse(owner.value) in EVENT_ENUMS)
                    or (isinstance(owner, ast.Name) and owner.id in enum_typed)
                ):
                    loose.append(f"{file.relative_to(ROOT)}:{node.lineno}")
    return found - {""}, loose, recorders


def test_every_reason_the_code_emits_is_on_the_reasons_page() -> None:
    found, loose, recorders = emitted_reasons()
    assert loose == [], "record Events with a member of core/reasons.py's enums"
    # The scan works: it sees the pods' (journal), claims' and RunPod lines' Events, and
    # the status reasons of containers and of the node.
    assert recorders >= 3 and {"ContainerCreating", "NotRunOnRunPod", "KubeletReady"} <= found
    page = (REFERENCE / "reasons.md").read_text()
    named = set(re.findall(r"^\| `(\w+)`", page, re.M))
    assert reasons.documented() <= named
    for enum in (PodReason, Notice, VolumeNotice):
        assert {member.value for member in enum} <= named, enum.__name__
    assert sorted(found - EXEC_STATUS_REASONS - named) == []
