"""RBAC as the API server evaluates it, loaded from the manifests we ship in deploy/.

Only the subject's own bindings count; there is no aggregation and no escalation
check. Discovery and /version are open to every authenticated caller, as the
built-in `system:discovery` role makes them in a real cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Attributes:
    """What a request wants to do, in RBAC's terms."""

    verb: str
    api_group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""


@dataclass(frozen=True)
class Rule:
    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Rule:
        return cls(
            *(
                frozenset(raw.get(field) or ())
                for field in ("apiGroups", "resources", "verbs", "resourceNames")
            )
        )

    def allows(self, attrs: Attributes) -> bool:
        return (
            bool(self.api_groups & {"*", attrs.api_group})
            and bool(self.verbs & {"*", attrs.verb})
            and self._allows_resource(attrs)
            and (not self.resource_names or attrs.name in self.resource_names)
        )

    def _allows_resource(self, attrs: Attributes) -> bool:
        if "*" in self.resources:
            return True
        if not attrs.subresource:
            return attrs.resource in self.resources
        wanted = {
            f"{attrs.resource}/{attrs.subresource}",
            f"{attrs.resource}/*",
            f"*/{attrs.subresource}",
        }
        return bool(self.resources & wanted)


@dataclass(frozen=True)
class Grant:
    """Rules granted to the subject, cluster-wide (namespace "") or in one namespace."""

    namespace: str
    rules: tuple[Rule, ...]


class Authorizer:
    def __init__(self, grants: Sequence[Grant]) -> None:
        self._grants = tuple(grants)

    @classmethod
    def from_files(cls, paths: Iterable[str], subject: str) -> Authorizer:
        return cls.from_documents(load_documents(paths), subject)

    @classmethod
    def from_documents(
        cls, documents: Sequence[dict[str, Any]], subject: str, groups: Iterable[str] | None = None
    ) -> Authorizer:
        """`groups` as the authenticator reported them; by default those of the name."""
        known = (
            set(groups) | {"system:authenticated"} if groups is not None else _groups_of(subject)
        )
        return cls(list(_grants_for(documents, subject, known)))

    def allows(self, attrs: Attributes) -> bool:
        return any(
            rule.allows(attrs)
            for grant in self._grants
            if not grant.namespace or grant.namespace == attrs.namespace
            for rule in grant.rules
        )


def load_documents(paths: Iterable[str]) -> list[dict[str, Any]]:
    return [doc for path in paths for doc in yaml.safe_load_all(Path(path).read_text()) if doc]


def _grants_for(
    documents: Sequence[dict[str, Any]], subject: str, groups: set[str]
) -> Iterable[Grant]:
    roles = {
        (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]): tuple(
            Rule.parse(rule) for rule in doc.get("rules") or []
        )
        for doc in documents
        if doc.get("kind") in ("ClusterRole", "Role")
    }
    for doc in documents:
        if doc.get("kind") not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(_is_subject(s, subject, groups) for s in doc.get("subjects") or []):
            continue
        binding_namespace = doc["metadata"].get("namespace", "")
        ref = doc["roleRef"]
        role_namespace = binding_namespace if ref["kind"] == "Role" else ""
        rules = roles.get((ref["kind"], role_namespace, ref["name"]), ())
        # A RoleBinding grants even a ClusterRole's rules only inside its namespace.
        yield Grant(binding_namespace if doc["kind"] == "RoleBinding" else "", rules)


def _is_subject(entry: dict[str, Any], subject: str, groups: set[str]) -> bool:
    kind, name = entry.get("kind"), entry.get("name")
    if kind == "ServiceAccount":
        return subject == f"system:serviceaccount:{entry.get('namespace', '')}:{name}"
    if kind == "Group":
        return name in groups
    return kind == "User" and name == subject


def _groups_of(subject: str) -> set[str]:
    groups = {"system:authenticated"}
    parts = subject.split(":")
    if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
        groups |= {"system:serviceaccounts", f"system:serviceaccounts:{parts[2]}"}
    return groups
