"""Reads and writes of the state store, each in its own short transaction: the mappings,
clusters and ticks here, the other tables by concern in their own modules.

No transaction is held open around an HTTP call (docs/architecture.md §2). The
executor's row and journal writes go through a `WriteBatch` (`batch()`), which commits
them in few transactions at the points the protocol of docs/architecture.md §4 needs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, true
from sqlalchemy.orm import Session, sessionmaker

from reconciler.adapters.store.attributions import SavedAttributions
from reconciler.adapters.store.batch import WriteBatch
from reconciler.adapters.store.billing import Billing
from reconciler.adapters.store.catalogs import Catalogs
from reconciler.adapters.store.charge_audit import ChargeAudit
from reconciler.adapters.store.host_keys import SavedHostKeys
from reconciler.adapters.store.listed_clusters import ListedClusters
from reconciler.adapters.store.listed_volumes import ListedVolumes
from reconciler.adapters.store.locks import Locks
from reconciler.adapters.store.models import (
    ActionRecord,
    InstantCluster,
    Mapping,
    MappingGeneration,
    Tick,
)
from reconciler.adapters.store.namespaces import Namespaces
from reconciler.adapters.store.saved_logs import SavedLogs
from reconciler.core.cluster_row import ClusterRow
from reconciler.core.mapping import MappingRow

_FIELDS = [f.name for f in dataclasses.fields(MappingRow)]
_LOAD_ROWS = select(*(Mapping.__table__.c[name] for name in _FIELDS))
_GENERATION = select(MappingGeneration.value, MappingGeneration.token).where(
    MappingGeneration.id == 1
)


def _of_node(column: Any, node: str | None) -> Any:
    """A node's rows, and those written before rows had a node; every row for None."""
    return true() if node is None else or_(column == node, column.is_(None))


# A tick row keeps the first errors; the log has them all.
MAX_TICK_ERRORS = 20


@dataclass(frozen=True)
class TickSummary:
    """What the row of a finished tick records, for `state show` and post-mortems."""

    started_at: datetime
    finished_at: datetime
    pods_seen: int
    instances_seen: int
    actions_planned: int
    actions_applied: int
    actions_failed: int
    errors: tuple[str, ...] = ()
    gpu_utilization: dict[str, list[float]] = field(default_factory=dict)
    """Per pod ("<namespace>/<pod>"), each GPU's utilization, 0-1."""


class Store:
    """The mappings, the gangs' clusters, the ticks and their journal; the other tables
    by concern, each its own object over the same sessions (`store.billing.save(...)`)."""

    def __init__(self, sessions: sessionmaker[Session], node: str | None = None) -> None:
        """`node`: the virtual node whose rows (pods' mappings, gangs' clusters) this
        store reads and writes; None: every row (the CLI's views)."""
        self._sessions = sessions
        self.node = node
        self._load_rows = _LOAD_ROWS.where(_of_node(Mapping.__table__.c.node, node))
        self.saved_logs = SavedLogs(sessions)
        self.billing = Billing(sessions)
        self.listed_volumes = ListedVolumes(sessions)
        self.listed_clusters = ListedClusters(sessions)
        self.charge_audit = ChargeAudit(sessions)
        self.attributions = SavedAttributions(sessions)
        self.namespaces = Namespaces(sessions)
        self.locks = Locks(sessions)
        self.host_keys = SavedHostKeys(sessions)
        self.catalogs = Catalogs(sessions)
        self._rows_read: tuple[tuple[object, ...], list[MappingRow]] | None = None

    # --- mappings ---------------------------------------------------------------

    def load_rows(self) -> list[MappingRow]:
        """Every row. The rows read last are given again while the database's count of
        writes to them and the token each write draws (`MappingGeneration`, moved by its
        triggers whoever writes) read as they did: a steady tick writes none, and reading
        10 000 was a tenth of it. The count alone could be fooled: a restored backup
        moves it back, and later writes up to the cached value again, over other rows.

        The generation is read before and after the rows, and they are kept for reuse
        only when both agree: on a database whose every statement sees its own snapshot
        (PostgreSQL's READ COMMITTED), a write between the two would leave rows newer
        than the generation they are kept under."""
        with self._sessions() as session:
            connection = session.connection()
            generation = tuple(connection.execute(_GENERATION).one())
            read = self._rows_read
            if read is None or read[0] != generation:
                # The rows read before go first: never two copies alive at once.
                self._rows_read = read = None
                # Core, not the ORM, and the columns in the record's field order: at
                # 10 000 rows the ORM's loading and a dict per row cost 60 % more CPU.
                rows = [MappingRow(*row) for row in connection.execute(self._load_rows)]
                if tuple(connection.execute(_GENERATION).one()) == generation:
                    self._rows_read = (generation, rows)
                return list(rows)
        return list(read[1])

    def batch(self) -> WriteBatch:
        """Row and journal writes to commit together (see `reconciler.adapters.store.batch`)."""
        return WriteBatch(self._sessions, self.node)

    def save_row(self, row: MappingRow) -> None:
        """One row, committed at once."""
        batch = self.batch()
        batch.save_row(row)
        batch.commit()

    def delete_row(self, pod_uid: str) -> None:
        batch = self.batch()
        batch.delete_row(pod_uid)
        batch.commit()

    def row(self, pod_uid: str) -> MappingRow | None:
        with self._sessions() as session:
            found = session.get(Mapping, pod_uid)
            if found is None or found.node not in (None, self.node or found.node):
                return None
            return MappingRow(**{f: getattr(found, f) for f in _FIELDS})

    # --- gangs' clusters ----------------------------------------------------------

    def load_clusters(self) -> list[ClusterRow]:
        names = [f.name for f in dataclasses.fields(ClusterRow)]
        with self._sessions() as session:
            return [
                ClusterRow(**{name: getattr(row, name) for name in names})
                for row in session.scalars(
                    select(InstantCluster).where(
                        _of_node(InstantCluster.__table__.c.node, self.node)
                    )
                )
            ]

    # --- ticks and the journal ----------------------------------------------------

    def open_tick(self, started_at: datetime) -> int:
        """The row of a tick in progress, for its journal entries to point at; its id."""
        with self._sessions.begin() as session:
            tick = Tick(started_at=started_at)
            session.add(tick)
            session.flush()
            return tick.id

    def record_tick(self, summary: TickSummary, tick_id: int | None = None) -> int:
        """Write a finished tick's row (the one `open_tick` gave, if any); its id."""
        row = Tick(
            id=tick_id,
            started_at=summary.started_at,
            finished_at=summary.finished_at,
            pods_seen=summary.pods_seen,
            instances_seen=summary.instances_seen,
            actions_planned=summary.actions_planned,
            actions_applied=summary.actions_applied,
            actions_failed=summary.actions_failed,
            dry_run=False,
            error_summary="\n".join(summary.errors[:MAX_TICK_ERRORS]) or None,
            gpu_utilization=json.dumps(summary.gpu_utilization)
            if summary.gpu_utilization
            else None,
        )
        with self._sessions.begin() as session:
            merged = session.merge(row)
            session.flush()
            return merged.id

    def journal(self, tick_id: int | None = None) -> Sequence[ActionRecord]:
        with self._sessions() as session:
            query = select(ActionRecord).order_by(ActionRecord.id)
            if tick_id is not None:
                query = query.where(ActionRecord.tick_id == tick_id)
            return list(session.scalars(query))
