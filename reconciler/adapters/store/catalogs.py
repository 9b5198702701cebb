"""The catalogs last fetched, kept for `reconciler offers`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    CatalogCopy,
)
from reconciler.core.domain import (
    Availability,
    CpuFlavor,
    DataCenterStock,
    GpuType,
)


class Catalogs:
    """GPU and CPU catalogs as last fetched."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def save(
        self, entries: Sequence[GpuType | CpuFlavor], now: datetime, kind: str | None = None
    ) -> None:
        """Keep a fetched catalog (GPU types or CPU flavors; `kind` `cluster`: GPU types
        with Instant Cluster stock) for `reconciler offers`."""
        kind = kind or _catalog_kind(entries)
        if kind is None or not entries:  # an empty answer is a failed fetch's look
            return
        text = json.dumps([dataclasses.asdict(entry) for entry in entries])
        with self._sessions.begin() as session:
            session.merge(CatalogCopy(kind=kind, fetched_at=now, entries=text))

    def load(self, kind: str) -> tuple[list[GpuType | CpuFlavor], datetime] | None:
        """The catalog of `kind` (`gpu`, `cluster` or `cpu`) as last kept, and when it
        was fetched."""
        with self._sessions() as session:
            row = session.get(CatalogCopy, kind)
            if row is None:
                return None
            made: type[GpuType | CpuFlavor] = CpuFlavor if kind == "cpu" else GpuType
            entries = [made(**_with_stock(entry)) for entry in json.loads(row.entries)]
            return entries, row.fetched_at


def _catalog_kind(entries: Sequence[GpuType | CpuFlavor]) -> str | None:
    if not entries:
        return None  # an empty answer is a failed fetch's look: the last copy stays
    return "gpu" if isinstance(entries[0], GpuType) else "cpu"


def _with_stock(entry: dict[str, Any]) -> dict[str, Any]:
    """A catalog entry's JSON with its stock levels as the domain's values again."""
    datacenters = entry.get("datacenters") or []
    cuda: dict[str, Any] = {
        name: tuple(entry[name]) for name in ("cuda_versions", "cuda_available") if name in entry
    }
    return {
        **entry,
        **cuda,
        "availability": Availability(int(entry.get("availability") or 0)),
        "datacenters": tuple(
            DataCenterStock(str(dc["id"]), Availability(int(dc["availability"])))
            for dc in datacenters
        ),
    }
