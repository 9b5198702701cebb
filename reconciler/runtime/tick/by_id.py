"""Reading by id what a list omits or shows changed: RunPod's lists lag behind creates for
longer than any grace, and one list is no proof of anything, so a resource we expect (a
mapped instance, a cluster a gang records, the volume a PersistentVolume names) that a
list does not show, or shows without our tags, is asked for by id. Only RunPod's 404
says it is gone, and only its record by id that its tags changed: that record replaces
what the list showed (docs/architecture.md §3, "Cloud resources"). One shared path for
every resource; each asks only while its list omits or changes one it expects, so a
steady tick sends nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from reconciler.adapters.runpod.errors import RunPodNotFound
from reconciler.core.domain import is_runpod_id

log = logging.getLogger(__name__)

Found = TypeVar("Found")
Listed = TypeVar("Listed")


@dataclass(frozen=True)
class ReadById(Generic[Found]):
    found: list[Found] = field(default_factory=list)
    """What RunPod answered for the ids it still has (the list lagged)."""
    gone: frozenset[str] = frozenset()
    """The ids RunPod answered 404 for: gone, proven."""
    asked: frozenset[str] = frozenset()
    """Every id read."""


def believed(
    listed: Sequence[Listed], read: ReadById[Listed], id_of: Callable[[Listed], str | None]
) -> list[Listed]:
    """The list with what was read by id in place of what it showed for those ids: a
    record read by id wins over the list, and a 404 drops what the list still showed."""
    if not read.asked:
        return list(listed)
    replaced = [item for item in listed if id_of(item) in read.asked]
    if replaced:
        log.warning(
            "the list showed %d resources without the tags we know them by (%s): "
            "read by id, their records are believed",
            len(replaced),
            ", ".join(sorted({str(id_of(item)) for item in replaced})[:5]),
        )
    return [item for item in listed if id_of(item) not in read.asked] + read.found


def read_by_id(ids: Iterable[str], read: Callable[[str], Found]) -> ReadById[Found]:
    """One GET per id, in order; any other error than a 404 is raised (nothing is
    concluded from a failed read)."""
    found: list[Found] = []
    gone: set[str] = set()
    wanted = set(ids)
    asked = sorted(i for i in wanted if is_runpod_id(i))
    if len(asked) < len(wanted):
        log.warning("ids not of RunPod's form are not read by id (nothing is concluded)")
    for resource_id in asked:
        try:
            found.append(read(resource_id))
        except RunPodNotFound:
            gone.add(resource_id)
    return ReadById(found, frozenset(gone), frozenset(asked))
