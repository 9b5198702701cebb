"""Ids RunPod still bills though they are gone, and their ghost charges."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.models import (
    GoneBilled,
    ResourceList,
)
from reconciler.core.money.ghost_charges import GhostCharge, Gone

_CHARGE_AUDIT = "ghost-charges"


class ChargeAudit:
    """The last ghost-charge audit's outcome."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def at(self) -> datetime | None:
        with self._sessions() as session:
            read = session.get(ResourceList, _CHARGE_AUDIT)
            return None if read is None else read.listed_at

    def touch(self, now: datetime) -> None:
        """An audit that failed: the next is due in the next hour, not on every tick."""
        with self._sessions.begin() as session:
            session.merge(ResourceList(name=_CHARGE_AUDIT, listed_at=now))

    def gone_billed(self) -> list[Gone]:
        with self._sessions() as session:
            rows = session.scalars(select(GoneBilled).order_by(GoneBilled.resource_id))
            return [Gone(row.kind, row.resource_id, row.gone_since) for row in rows]

    def ghost_charges(self) -> list[GhostCharge]:
        """The ghost charges the last audit found (told on every tick until it clears)."""
        with self._sessions() as session:
            query = select(GoneBilled).where(GoneBilled.charged_usd.is_not(None))
            return [
                GhostCharge(
                    row.kind, row.resource_id, row.charged_usd or 0.0, row.gone_since, row.named_by
                )
                for row in session.scalars(query.order_by(GoneBilled.resource_id))
            ]

    def save(self, gone: Sequence[Gone], ghosts: Sequence[GhostCharge], now: datetime) -> None:
        """One audit's outcome in place of the last one's: the ids billed and gone now
        (an id billed no more, or found again, is forgotten), and their ghost charges."""
        told = {(g.kind, g.resource_id): g for g in ghosts}
        with self._sessions.begin() as session:
            session.execute(delete(GoneBilled))
            for item in gone:
                ghost = told.get((item.kind, item.resource_id))
                session.add(
                    GoneBilled(
                        kind=item.kind,
                        resource_id=item.resource_id,
                        gone_since=item.since,
                        charged_usd=None if ghost is None else ghost.usd,
                        named_by=None if ghost is None else ghost.named_by,
                    )
                )
            session.merge(ResourceList(name=_CHARGE_AUDIT, listed_at=now))
