"""Reads of the state store shared by the engine and the CLI."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from reconciler.adapters.store.models import Mapping, MappingState, Tick

FINISHED_STATES = (MappingState.TERMINATED, MappingState.FAILED)


def mappings(session: Session, namespace: str | None = None,
             include_finished: bool = True) -> list[Mapping]:
    query = select(Mapping).order_by(Mapping.namespace, Mapping.name, Mapping.created_at)
    if namespace is not None:
        query = query.where(Mapping.namespace == namespace)
    if not include_finished:
        query = query.where(Mapping.state.not_in(FINISHED_STATES))
    return list(session.scalars(query))


def last_tick(session: Session) -> Tick | None:
    return session.scalars(select(Tick).order_by(Tick.id.desc()).limit(1)).first()
