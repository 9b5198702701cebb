"""One route of the kubelet endpoint: its methods, its path's pattern and what serves it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Handler = Callable[[Any, Mapping[str, str], str], None]
"""Serves one matched request: the path's named segments and the raw query."""


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]
    path: tuple[str, ...]
    """Literal segments, `{name}` for one named segment, a last `*` for any rest."""
    serve: Handler
    leader_only: bool = True
    """Served by the leader alone; a standby answers 503."""

    def match(self, method: str, parts: list[str]) -> dict[str, str] | None:
        """The named segments when `method` and `parts` are this route's, else None."""
        if method not in self.methods:
            return None
        rest = self.path[-1] == "*"
        fixed = self.path[:-1] if rest else self.path
        if len(parts) < len(fixed) or (not rest and len(parts) != len(fixed)):
            return None
        named: dict[str, str] = {}
        for pattern, part in zip(fixed, parts, strict=False):
            if pattern.startswith("{"):
                named[pattern.strip("{}")] = part
            elif pattern != part:
                return None
        return named
