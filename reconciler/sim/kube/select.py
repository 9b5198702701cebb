"""Field and label selectors, parsed and matched the way the API server does.

Only the grammar clients actually send is supported: comma-separated terms; label terms
`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`; field terms `path=v`,
`path==v`, `path!=v` over the field paths each resource allows. A field value escapes
`\\`, `,` and `=` with a backslash (apimachinery's `fields.EscapeValue`); any other
escape, or a bare `=` in a value, is refused as the API server refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_KEY = r"[A-Za-z0-9](?:[A-Za-z0-9._/-]*[A-Za-z0-9])?"
_VALUE = r"[A-Za-z0-9._-]*"
_EQUALITY = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


class SelectorError(ValueError):
    """A selector the server cannot parse (answered with 400 BadRequest)."""


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the label too, as in Kubernetes.
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    negate: bool

    def matches(self, obj: dict[str, Any]) -> bool:
        return (field_value(obj, self.path) == self.value) != self.negate


@dataclass(frozen=True)
class Selector:
    """A label selector and a field selector; an object must satisfy every term."""

    labels: tuple[LabelRequirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: dict[str, Any]) -> bool:
        if self.fields and not all(term.matches(obj) for term in self.fields):
            return False
        if self.labels:
            labels = obj.get("metadata", {}).get("labels") or {}
            return all(term.matches(labels) for term in self.labels)
        return True

    @property
    def everything(self) -> bool:
        return not self.labels and not self.fields


def field_value(obj: dict[str, Any], path: tuple[str, ...]) -> str:
    """The string value at a dotted path; absent fields read as "" (like unset Go strings)."""
    node: Any = obj
    for part in path:
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    return "" if node is None else str(node)


def parse_selector(label_text: str, field_text: str, allowed_fields: Iterable[str]) -> Selector:
    return Selector(
        labels=parse_label_selector(label_text),
        fields=parse_field_selector(field_text, frozenset(allowed_fields)),
    )


def parse_label_selector(text: str) -> tuple[LabelRequirement, ...]:
    return tuple(_parse_label_term(term) for term in _split_terms(text))


def parse_field_selector(text: str, allowed: frozenset[str]) -> tuple[FieldRequirement, ...]:
    requirements = []
    for term in _split_escaped(text):
        match = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*(==|=|!=)(.*)", term, re.DOTALL)
        if match is None:
            raise SelectorError(f"invalid field selector term {term!r}")
        path, op, value = match.groups()
        if path not in allowed:
            raise SelectorError(f'field label not supported: "{path}"')
        requirements.append(
            FieldRequirement(tuple(path.split(".")), _unescape(value.strip()), op == "!=")
        )
    return tuple(requirements)


def _split_escaped(text: str) -> list[str]:
    """Split a field selector on the commas no backslash escapes."""
    terms: list[str] = []
    current: list[str] = []
    escaped = False
    for char in text:
        if char == "," and not escaped:
            terms.append("".join(current))
            current = []
            continue
        escaped = char == "\\" and not escaped
        current.append(char)
    terms.append("".join(current))
    return [term for term in terms if term.strip()]


def _unescape(value: str) -> str:
    out: list[str] = []
    chars = iter(value)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            if following not in ("\\", ",", "="):
                raise SelectorError(f"invalid field selector: invalid escape sequence in {value!r}")
            out.append(following)
        elif char == "=":
            raise SelectorError(f"invalid field selector: unescaped = in {value!r}")
        else:
            out.append(char)
    return "".join(out)


def _parse_label_term(term: str) -> LabelRequirement:
    if match := _SET.match(term):
        values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
        return LabelRequirement(match.group(1), match.group(2), values)
    if match := _EQUALITY.match(term):
        op = "!=" if match.group(2) == "!=" else "="
        return LabelRequirement(match.group(1), op, frozenset({match.group(3)}))
    if match := _EXISTS.match(term):
        return LabelRequirement(match.group(2), "!exists" if match.group(1) else "exists")
    raise SelectorError(f"unable to parse requirement {term!r}")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current.append(char)
    terms.append("".join(current))
    return [term for term in terms if term.strip()]
