"""The one rule for ids a tenant writes (docs/architecture.md §3, "Ids a tenant writes").

Whoever may edit a pod (or its Job) may write any id into it: `runpod.io/pod-id`,
`runpod.io/network-volume-id`, `runpod.io/container-registry-auth-id`, an ownerReference's
Job UID. None of them is proof. Such an id names a RunPod resource for that pod only if
RunPod's own record of the resource (the tick's list, or a read by id) carries our owner
mark and its marks say it belongs to what the pod's namespace owns: that pod, one of
that namespace's claims, a Job of that namespace, that namespace's own pull secrets.

Each resource says what its record's marks are (`Marks`: an instance's env tags, a
volume's or a credential's name, a member's gang tag); this module alone decides.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from reconciler.core.printable import quoted


@dataclass(frozen=True)
class Marks:
    """What RunPod's record of a resource says of whose it is."""

    ours: bool
    """It carries our owner mark (this reconciler's owner id, not another's)."""
    belongs_to: str | None
    """What its marks say it was made for: a pod's UID, a claim's UID, a Job's UID, a
    pull secret's content digest; None when they say nothing."""


def refusal(what: str, resource_id: str, marks: Marks | None, owned: Collection[str]) -> str | None:
    """Why the id a tenant wrote does not name a resource of that namespace; None when
    it does. `marks` is RunPod's record (None: RunPod has no such resource, as far as
    the tick's reads go); `owned` what the namespace owns that such a resource may be
    made for."""
    if marks is not None and marks.ours and marks.belongs_to in owned:
        return None  # the usual answer, every tick for every pod: no text made for it
    named = f"{what} {quoted(resource_id)}"
    if marks is None:
        return f"RunPod has no {named}"
    if not marks.ours:
        return f"{named} is not this reconciler's"
    return f"{named} was not made for this namespace's {_owner_word(what)}"


def _owner_word(what: str) -> str:
    return {
        "instance": "pod",
        "network volume": "claims",
        "registry credential": "pull secrets",
        "cluster member": "Job",
    }.get(what, "objects")
