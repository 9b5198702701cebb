"""What `state show` shows of namespaces' caps and of look-alike instances."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    NamespaceBudget,
    UnownedInstance,
)
from reconciler.core.money.namespace_caps import NamespaceCaps
from reconciler.core.pods.ownership import Lookalike


class Namespaces:
    """Namespace caps and look-alikes as last found."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def save_caps(self, caps: Sequence[NamespaceCaps], now: datetime) -> None:
        """Remember the caps `state show` shows; writes only what changed."""
        with self._sessions.begin() as session:
            for cap in caps:
                known = session.get(NamespaceBudget, cap.namespace)
                values = (cap.max_hourly_spend, cap.max_instances, cap.error)
                if (
                    known is not None
                    and (known.max_hourly_spend, known.max_instances, known.error) == values
                ):
                    continue
                if cap.empty:
                    if known is not None:
                        session.delete(known)
                    continue
                session.merge(
                    NamespaceBudget(
                        namespace=cap.namespace,
                        max_hourly_spend=values[0],
                        max_instances=values[1],
                        error=values[2],
                        updated_at=now,
                    )
                )

    def sync_lookalikes(self, found: Sequence[Lookalike], now: datetime) -> None:
        """Keep the look-alike list equal to this tick's; writes only on a change."""
        with self._sessions.begin() as session:
            known = {row.instance_id: row for row in session.scalars(select(UnownedInstance))}
            wanted = {item.instance_id: item for item in found}
            for instance_id in known.keys() - wanted.keys():
                session.delete(known[instance_id])
            for instance_id in wanted.keys() - known.keys():
                item = wanted[instance_id]
                session.add(
                    UnownedInstance(
                        instance_id=instance_id,
                        name=item.name,
                        namespace=item.namespace,
                        pod_name=item.pod_name,
                        first_seen_at=now,
                    )
                )
