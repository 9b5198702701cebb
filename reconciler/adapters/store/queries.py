"""Reads of the state store shared by the engine and the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from reconciler.adapters.store.models import (
    BilledResource,
    BillingCoverage,
    GoneBilled,
    InstantCluster,
    ListedVolume,
    Mapping,
    MappingState,
    NamespaceBudget,
    ResourceSpendRecord,
    SpendRecord,
    Tick,
    UnownedInstance,
)
from reconciler.core.cluster_row import ClusterState

FINISHED_STATES = (MappingState.TERMINATED, MappingState.FAILED)


def mappings(
    session: Session, namespace: str | None = None, include_finished: bool = True
) -> list[Mapping]:
    query = select(Mapping).order_by(Mapping.namespace, Mapping.name, Mapping.created_at)
    if namespace is not None:
        query = query.where(Mapping.namespace == namespace)
    if not include_finished:
        query = query.where(Mapping.state.not_in(FINISHED_STATES))
    return list(session.scalars(query))


def last_tick(session: Session) -> Tick | None:
    return session.scalars(select(Tick).order_by(Tick.id.desc()).limit(1)).first()


@dataclass(frozen=True)
class SpendLine:
    """One billed hour of one of our instances, with the pod it ran for."""

    instance_id: str
    bucket_start: datetime
    usd: float
    pod_uid: str | None
    namespace: str | None
    name: str | None
    gpu_type_id: str | None


def spend_lines(session: Session, since: datetime | None = None) -> list[SpendLine]:
    query = (
        select(
            SpendRecord.instance_id,
            SpendRecord.bucket_start,
            SpendRecord.total_usd,
            Mapping.pod_uid,
            Mapping.namespace,
            Mapping.name,
            Mapping.gpu_type_id,
        )
        .join(Mapping, Mapping.instance_id == SpendRecord.instance_id, isouter=True)
        .order_by(SpendRecord.bucket_start)
    )
    if since is not None:
        query = query.where(SpendRecord.bucket_start >= since)
    return [SpendLine(*row) for row in session.execute(query)]


@dataclass(frozen=True)
class ResourceSpendLine:
    """One billed hour of one of our network volumes or Instant Clusters, with whose it
    is (namespace None: not known)."""

    kind: str
    resource_id: str
    bucket_start: datetime
    usd: float
    namespace: str | None
    name: str | None
    detail: str | None


def resource_spend_lines(
    session: Session, since: datetime | None = None
) -> list[ResourceSpendLine]:
    query = (
        select(
            ResourceSpendRecord.kind,
            ResourceSpendRecord.resource_id,
            ResourceSpendRecord.bucket_start,
            ResourceSpendRecord.total_usd,
            BilledResource.namespace,
            BilledResource.name,
            BilledResource.detail,
        )
        .join(
            BilledResource,
            (BilledResource.kind == ResourceSpendRecord.kind)
            & (BilledResource.resource_id == ResourceSpendRecord.resource_id),
            isouter=True,
        )
        .order_by(ResourceSpendRecord.bucket_start)
    )
    if since is not None:
        query = query.where(ResourceSpendRecord.bucket_start >= since)
    return [ResourceSpendLine(*row) for row in session.execute(query)]


def billing_covered_until(session: Session, route: str = "pods") -> datetime | None:
    """How far a billing route (pods, network-volumes, clusters) has been read."""
    read = session.get(BillingCoverage, route)
    return None if read is None else read.covered_until


def billing_reaches(session: Session) -> dict[str, datetime]:
    """How far each billing route has been read, by its name (pods, and each kind a
    resource's billing route keeps: network-volumes, clusters, a plug-in's)."""
    return {read.name: read.covered_until for read in session.scalars(select(BillingCoverage))}


def namespace_budgets(session: Session) -> list[NamespaceBudget]:
    return list(session.scalars(select(NamespaceBudget).order_by(NamespaceBudget.namespace)))


def unowned_instances(session: Session) -> list[UnownedInstance]:
    return list(session.scalars(select(UnownedInstance).order_by(UnownedInstance.instance_id)))


def leaked_volumes(session: Session) -> list[ListedVolume]:
    """Volumes of ours the last leak audit found no PV or claim uses."""
    query = select(ListedVolume).where(ListedVolume.leaked_since.is_not(None))
    return list(session.scalars(query.order_by(ListedVolume.leaked_since)))


def charged_gone(session: Session) -> list[GoneBilled]:
    """Ids RunPod charged in the last hour read that it neither lists nor answers for."""
    query = select(GoneBilled).where(GoneBilled.charged_usd.is_not(None))
    return list(session.scalars(query.order_by(GoneBilled.kind, GoneBilled.resource_id)))


def clusters(session: Session, namespace: str | None) -> list[InstantCluster]:
    """The gangs' Instant Clusters, oldest attempt first; not those RunPod said are gone
    (their rows stay only for the gang's end)."""
    query = (
        select(InstantCluster)
        .where(InstantCluster.state != ClusterState.GONE)
        .order_by(InstantCluster.attempt_started_at)
    )
    if namespace is not None:
        query = query.where(InstantCluster.namespace == namespace)
    return list(session.scalars(query))
