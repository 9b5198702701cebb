"""The last list's instances, kept so that an instance whose JSON did not change since
the previous list is not parsed again.

A steady tick lists every instance of the account, and most answer exactly as they did
a tick ago. Parsing one field by field costs far more than reading its JSON back as text
(`repr`, in C), so each instance is kept with a digest of that text: the same digest
under the same id gives back the instance parsed before. Memory stays flat: the parsed
instances live on between ticks instead of being made again, and a digest is an int.
"""

from __future__ import annotations

from reconciler.adapters.runpod.parse import parse_instance
from reconciler.core.domain import Instance


class UnchangedInstances:
    def __init__(self) -> None:
        self._last: dict[str, tuple[int, Instance]] = {}

    def parse(self, pods: list[object]) -> list[Instance]:
        """`parse_instance` of each, reusing the instances whose JSON is unchanged."""
        last, kept, found = self._last, {}, []
        for raw in pods:
            ident = raw.get("id") if type(raw) is dict else None
            if type(ident) is not str:
                found.append(parse_instance(raw))  # refused or odd: never remembered
                continue
            digest = hash(repr(raw))
            before = last.get(ident)
            instance = (
                before[1] if before is not None and before[0] == digest else parse_instance(raw)
            )
            kept[ident] = (digest, instance)
            found.append(instance)
        self._last = kept
        return found
