"""Our registry credentials at RunPod: their names, which are ours, and which to collect
(docs/architecture.md §3, "Cloud resources").

A credential has no env to tag, so its name is its tag: the prefix, a digest of the owner
id and a digest of what it holds. The same pull secret always gives the same name, so a
credential whose create answer was lost is found in the next list and used (adopted), and
two clusters sharing an account never take each other's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.core.actions import DeleteRegistryAuth
from reconciler.core.domain import REGISTRY_NAME_PREFIX, Instance, InstanceStatus, RegistryAuth
from reconciler.core.tenancy import Marks, refusal


def registry_name(owner_id: str, registry: str, username: str, password: str) -> str:
    """Our credential's name: the prefix, whose credential it is, and what it holds.

    A rotated password gives a new name (so a new credential); the owner digest keeps
    two clusters sharing an account from deleting each other's credentials.
    """
    content = hashlib.sha256(f"{registry}\0{username}\0{password}".encode()).hexdigest()[:16]
    return f"{_our_prefix(owner_id)}{content}"


@dataclass(frozen=True)
class Naming:
    """Which credentials a pod's runpod.io/container-registry-auth-id may name."""

    owner_id: str
    allowed_ids: tuple[str, ...]
    """Those the administrator allows any pod (`--registry-auth-ids`)."""

    def refusal(
        self, auth_id: str, listed: Mapping[str, str], own_names: Iterable[str]
    ) -> str | None:
        """Why a pod may not pull with the credential it names: only one the
        administrator allows, or one of ours made from the pod's own pull secrets
        (`own_names`), by RunPod's record of it (its name, in `listed`: name to id).
        None: it may."""
        if auth_id in self.allowed_ids:
            return None
        name = next((n for n, i in listed.items() if i == auth_id), None)
        ours = name is not None and name.startswith(_our_prefix(self.owner_id))
        marks = None if name is None else Marks(ours, name)
        return refusal("registry credential", auth_id, marks, frozenset(own_names))


def is_ours(auth: RegistryAuth, owner_id: str) -> bool:
    return auth.name.startswith(_our_prefix(owner_id))


def _our_prefix(owner_id: str) -> str:
    return f"{REGISTRY_NAME_PREFIX}{hashlib.sha256(owner_id.encode()).hexdigest()[:8]}-"


def collection(
    auths: Iterable[RegistryAuth],
    instances: Iterable[Instance],
    owner_id: str,
    keep: Iterable[str] = (),
) -> list[DeleteRegistryAuth]:
    """Delete our credentials that no listed instance uses (whoever owns the instance),
    except `keep` (what this tick's creates chose); never one that is not ours."""
    used = {
        i.registry_auth_id
        for i in instances
        if i.registry_auth_id and i.status is not InstanceStatus.TERMINATED
    }
    used |= set(keep)
    return [
        DeleteRegistryAuth(auth.id, auth.name)
        for auth in auths
        if is_ours(auth, owner_id) and auth.id not in used
    ]
