"""Slots for the streams the kubelet endpoint serves (log follows, exec and port-forward
sessions), counted by the namespace of the pod they are for.

Every request reaches the endpoint as the API server, so the caller cannot tell one
tenant from another: the pod's namespace can. A namespace holds at most `per_namespace`
slots of a kind, so one tenant's streams leave the others room; `total`, when set, caps
the node's streams of that kind whatever their namespaces.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum


class Refused(Enum):
    NAMESPACE = "namespace"
    """The namespace holds `per_namespace` already."""
    NODE = "node"
    """The node holds `total` already."""


class NamespaceSlots:
    def __init__(self, per_namespace: int, total: int | None = None) -> None:
        self.per_namespace, self.total = per_namespace, total
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, namespace: str) -> Iterator[Refused | None]:
        """One slot for `namespace`, held for the block (None), or why there is none."""
        with self._lock:
            refused = self._refusal(namespace)
            if refused is None:
                self._held[namespace] += 1
        try:
            yield refused
        finally:
            if refused is None:
                with self._lock:
                    self._held[namespace] -= 1
                    if not self._held[namespace]:
                        del self._held[namespace]

    def _refusal(self, namespace: str) -> Refused | None:
        if self._held[namespace] >= self.per_namespace:
            return Refused.NAMESPACE
        if self.total is not None and sum(self._held.values()) >= self.total:
            return Refused.NODE
        return None

    @property
    def held(self) -> int:
        """Slots held now, in every namespace."""
        with self._lock:
            return sum(self._held.values())
