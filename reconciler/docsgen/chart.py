"""The Helm chart's values: each key's type and range from `values.schema.json`, its
default from `values.yaml`, and its meaning from the comments above it there."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from reconciler.docsgen.markdown import code, table

CHART = Path("deploy/helm/runpod-reconciler")

_KEY = re.compile(r"^(\s*)([A-Za-z_][\w-]*):(.*)$")
_COMMENT = re.compile(r"^\s*#\s?(.*)$")


def comments(values_yaml: str) -> dict[str, str]:
    """The comment lines right above each key (and one after its value), by dotted path.
    A blank line ends a comment block, so the file's header belongs to no key."""
    found: dict[str, str] = {}
    pending: list[str] = []
    stack: list[tuple[int, str]] = []
    for line in values_yaml.splitlines():
        if not line.strip():
            pending = []
            continue
        comment = _COMMENT.match(line)
        if comment:
            pending.append(comment.group(1))
            continue
        key = _KEY.match(line)
        if key is None:
            pending = []
            continue
        indent, name, rest = len(key.group(1)), key.group(2), key.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([*(part for _, part in stack), name])
        stack.append((indent, name))
        inline = rest.split(" #", 1)[1].strip() if " #" in rest else ""
        text = " ".join([*pending, inline]).strip()
        if text:
            found[path] = text
        pending = []
    return found


def page(root: Path) -> str:
    schema = json.loads((root / CHART / "values.schema.json").read_text())
    text = (root / CHART / "values.yaml").read_text()
    rows = _rows(schema, yaml.safe_load(text), comments(text), "")
    return "\n".join(
        [
            "# Chart values\n",
            f"The values of the Helm chart in `{CHART}`. Its `values.schema.json` refuses "
            "unknown keys (a misspelt setting would otherwise be ignored) and values out of "
            "range. Settings left `null` are not passed, so the reconciler's own default "
            "applies ([Commands and flags](commands.md)); any other setting goes in "
            "`extraEnv` as a `RECONCILER_*` variable.\n",
            table(("value", "type", "default", "meaning"), rows),
        ]
    )


def _rows(
    schema: dict[str, Any], defaults: Any, notes: dict[str, str], prefix: str
) -> list[tuple[str, str, str, str]]:
    rows = []
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        default = defaults.get(name) if isinstance(defaults, dict) else None
        meaning = " ".join(part for part in (sub.get("description"), notes.get(path)) if part)
        if "properties" in sub:
            if meaning:
                rows.append((code(path), "object", "", meaning))
            rows += _rows(sub, default, notes, path + ".")
        else:
            rows.append((code(path), _kind(sub), _default(default), meaning))
    return rows


def _kind(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(code(json.dumps(v)) for v in schema["enum"])
    kinds = schema.get("type", "any")
    text = " or ".join(kinds) if isinstance(kinds, list) else kinds
    bounds = [
        f"{word} {schema[key]}"
        for key, word in (
            ("minimum", "≥"),
            ("maximum", "≤"),
            ("minLength", "length ≥"),
            ("maxLength", "length ≤"),
        )
        if key in schema
    ]
    if "pattern" in schema:
        bounds.append(f"matching {code(schema['pattern'])}")
    if schema.get("type") == "array" and "items" in schema:
        text += " of " + _kind(schema["items"])
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _default(value: Any) -> str:
    if value is None:
        return "`null`"
    return code(json.dumps(value))
