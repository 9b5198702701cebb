"""Kubeconfig files merged the way kubectl merges them.

`KUBECONFIG` (or `--kubeconfig`) may name several files separated by `:`. kubectl
(client-go's loading rules) skips files that do not exist, and lets the *first* file
that sets a value win: `current-context`, and each cluster, user and context by name.
The Python client's own merger lets the last `current-context` win instead, so a
reconciler would talk to another cluster than `kubectl` does with the same
environment. Relative file references are resolved against the file that names them,
as kubectl does, before the files are merged into one document.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

# Fields holding file paths, per named section (client-go's ResolvePaths).
_PATH_FIELDS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}


class KubeconfigError(ValueError):
    """No usable kubeconfig among the files named; the message says which and why."""


def split_paths(value: str) -> list[Path]:
    return [Path(part).expanduser() for part in value.split(os.pathsep) if part]


def merge(value: str) -> dict[str, Any]:
    """The merged kubeconfig of the `:`-separated files in `value` (kubectl's rules)."""
    paths = split_paths(value)
    existing = [p for p in paths if p.exists()]
    if not existing:
        named = ", ".join(str(p) for p in paths) or "(none)"
        raise KubeconfigError(f"no kubeconfig file exists among: {named}")
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    for path in existing:
        document = _read(path)
        if "current-context" not in merged and document.get("current-context"):
            merged["current-context"] = document["current-context"]
        for section in ("clusters", "users", "contexts"):
            known = {entry.get("name") for entry in merged[section]}
            for entry in document.get(section) or ():
                if isinstance(entry, dict) and entry.get("name") not in known:
                    merged[section].append(_resolved(section, entry, path.parent))
                    known.add(entry.get("name"))
    return merged


def _read(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML{line}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a kubeconfig (not a mapping)")
    return document


def _resolved(section: str, entry: dict[str, Any], base: Path) -> dict[str, Any]:
    if section not in _PATH_FIELDS:
        return entry
    body_key, fields = _PATH_FIELDS[section]
    body = dict(entry.get(body_key) or {})
    for name in fields:
        value = body.get(name)
        if isinstance(value, str) and value and not os.path.isabs(value):
            body[name] = str(base / value)
    return {**entry, body_key: body}
