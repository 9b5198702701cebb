"""Reading by id what a list omits: RunPod's lists lag behind creates for longer than
any grace, so a resource we expect (a mapped instance, a cluster a gang records, the
volume a PersistentVolume names) that a list does not show is asked for by id, and only
RunPod's 404 says it is gone (docs/architecture.md §3, "Cloud resources"). One shared
path for every resource; each asks only while its list omits one it expects, so a
steady tick sends nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from reconciler.adapters.runpod.errors import RunPodNotFound

Found = TypeVar("Found")


@dataclass(frozen=True)
class ReadById(Generic[Found]):
    found: list[Found] = field(default_factory=list)
    """What RunPod answered for the ids it still has (the list lagged)."""
    gone: frozenset[str] = frozenset()
    """The ids RunPod answered 404 for: gone, proven."""


def read_by_id(ids: Iterable[str], read: Callable[[str], Found]) -> ReadById[Found]:
    """One GET per id, in order; any other error than a 404 is raised (nothing is
    concluded from a failed read)."""
    found: list[Found] = []
    gone: set[str] = set()
    for resource_id in sorted(set(ids)):
        try:
            found.append(read(resource_id))
        except RunPodNotFound:
            gone.add(resource_id)
    return ReadById(found, frozenset(gone))
