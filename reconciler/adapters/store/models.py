"""The persisted state: which Kubernetes pod owns which RunPod instance, and what we did.

The mapping table is a cache of intent, not the source of truth: the instances' owner
tags and the pods' annotations can rebuild it (docs/architecture.md §4). What it adds
is memory across ticks that neither world keeps for us: a create in flight, orphan
sightings, the hash of the status we last wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from reconciler.core.cluster_row import ClusterState
from reconciler.core.mapping import MappingState
from reconciler.core.reasons import PodReason

# Named constraints so that Alembic's batch mode on SQLite can find and alter them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Stores naive UTC (SQLite has no time zones) and always hands back aware UTC."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class ReasonText(TypeDecorator[PodReason]):
    """A `PodReason` stored as its text (no CHECK constraint: a new reason needs no
    migration). A reason this version does not know reads back as none."""

    impl = String(64)
    cache_ok = True

    def process_bind_param(self, value: PodReason | None, dialect: Dialect) -> str | None:
        return None if value is None else PodReason(value).value

    def process_result_value(self, value: str | None, dialect: Dialect) -> PodReason | None:
        return PodReason.parse(value)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _state_column() -> Mapped[MappingState]:
    # Stored as plain strings (no CHECK constraint) so adding a state needs no migration.
    return mapped_column(
        Enum(
            MappingState,
            native_enum=False,
            create_constraint=False,
            length=16,
            values_callable=lambda states: [s.value for s in states],
        ),
        index=True,
    )


class Mapping(Base):
    """One row per managed Kubernetes pod, keyed by the pod's UID."""

    __tablename__ = "mappings"

    pod_uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253), index=True)
    name: Mapped[str] = mapped_column(String(253))
    state: Mapped[MappingState] = _state_column()
    instance_id: Mapped[str | None] = mapped_column(String(64), unique=True)
    """The RunPod pod id; unset while a create is in flight or in doubt."""
    instance_name: Mapped[str | None] = mapped_column(String(191))
    attempt_id: Mapped[str | None] = mapped_column(String(36))
    """Random id of the current create attempt, to tell a retried create from the first."""
    attempt_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the create intent was committed; the listing-lag grace period counts from it."""
    gpu_type_id: Mapped[str | None] = mapped_column(String(128))
    """The instance's GPU type, or its CPU flavor for a CPU instance."""
    datacenter_id: Mapped[str | None] = mapped_column(String(64))
    cost_per_hr: Mapped[float | None] = mapped_column(Float)
    last_instance_status: Mapped[str | None] = mapped_column(String(16))
    status_hash: Mapped[str | None] = mapped_column(String(64))
    """Fingerprint of the pod status we last wrote, so an unchanged status is not re-patched."""
    mirror_key: Mapped[str | None] = mapped_column(String(32))
    """Digest of the pod's resourceVersion and the instance fields its status and annotations
    were last computed from: while it holds, a tick need not compute them again."""
    exit_code: Mapped[int | None] = mapped_column(Integer)
    """Exit code of a finished batch pod's process, once read from the instance's log."""
    orphan_sightings: Mapped[int] = mapped_column(Integer, default=0)
    """Consecutive ticks on which the instance was seen without its pod."""
    reason: Mapped[PodReason | None] = mapped_column(ReasonText())
    """Why the pod waits or failed, as kubectl shows it (InstanceLost, BudgetExceeded…)."""
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    exited_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When a batch instance was first seen stopped without a readable exit code; the
    --exit-code-timeout counts from it."""
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the row became finished; RunPod's charges after it (and a grace) are leaks."""
    node: Mapped[str | None] = mapped_column(String(253), index=True)
    """The virtual node whose reconciler wrote the row: only it reads or writes the row
    (several nodes may share a database). None: written before rows had a node, taken by
    the first node that writes it."""
    start_failures: Mapped[str | None] = mapped_column(Text)
    """Where the pod's instances failed to start, `GPU type@data center` joined by `;`."""


class MappingGeneration(Base):
    """One row: a counter that the database's own triggers move on every write to
    `mappings`, whoever writes, and a token they draw anew each time. While both read as
    they did, the rows read then still hold."""

    __tablename__ = "mapping_generation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    value: Mapped[int] = mapped_column(Integer)
    token: Mapped[str] = mapped_column(String(32), server_default="")
    """Random, replaced by every write: a restored backup can move the count back to a
    value a reader cached, and later writes up to it again, but never this."""


class InstantCluster(Base):
    """One row per gang (an attempt of an Indexed Job run as one Instant Cluster), keyed
    by the gang's tag: the create intent before the call, then the cluster's id."""

    __tablename__ = "clusters"

    gang: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_uid: Mapped[str] = mapped_column(String(64), index=True)
    namespace: Mapped[str] = mapped_column(String(253))
    job_name: Mapped[str] = mapped_column(String(253))
    state: Mapped[ClusterState] = mapped_column(
        Enum(
            ClusterState,
            native_enum=False,
            create_constraint=False,
            length=16,
            values_callable=lambda states: [s.value for s in states],
        )
    )
    attempt_started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the create intent was committed; the listing-lag grace counts from it."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    cluster_id: Mapped[str | None] = mapped_column(String(64), unique=True)
    gpu_type_id: Mapped[str | None] = mapped_column(String(128))
    pod_count: Mapped[int] = mapped_column(Integer, default=0)
    cost_per_hr: Mapped[float | None] = mapped_column(Float)
    """The whole cluster's price, its members' summed."""
    reason: Mapped[PodReason | None] = mapped_column(ReasonText())
    """Why the last create was refused (the gang's pods show it while they wait), or why
    the gang failed once its DELETE was decided."""
    message: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    """Rank 0's exit code, the gang's result, recorded before the DELETE."""
    result_checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When rank 0's log was last read for the result: the reads' cadence survives restarts."""
    delete_answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When RunPod answered our DELETE; only then is the next one paused."""
    unread_ends: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Failed last reads of rank 0 while the gang was about to end (bounded)."""
    node: Mapped[str | None] = mapped_column(String(253), index=True)
    """The virtual node whose reconciler wrote the row (see `Mapping.node`)."""


class SpendRecord(Base):
    """What RunPod charged for one of our instances in one hour (GET /v2/billing/pods)."""

    __tablename__ = "spend_records"

    instance_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    bucket_start: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    bucket_end: Mapped[datetime] = mapped_column(UTCDateTime())
    total_usd: Mapped[float] = mapped_column(Float)
    gpu_usd: Mapped[float] = mapped_column(Float, default=0.0)
    disk_usd: Mapped[float] = mapped_column(Float, default=0.0)


class BilledResource(Base):
    """Whose a network volume or an Instant Cluster of ours is, for its charges: kept as
    long as `--cost-history` after it was last seen, so that they stay attributed once
    the claim, the Job or the resource is gone (`core.money.attribution`)."""

    __tablename__ = "billed_resources"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    """network-volume or cluster."""
    resource_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    namespace: Mapped[str | None] = mapped_column(String(253))
    """Unset: ours, but whose is not known (shown as unattributed)."""
    name: Mapped[str | None] = mapped_column(String(253))
    """The claim's name (a volume) or the Job's (a cluster)."""
    owner_uid: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[str | None] = mapped_column(String(128))
    """The volume's type or the cluster's GPU type."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the tick last wrote it (at least once a day while the resource is seen)."""


class ListedVolume(Base):
    """A network volume of ours as RunPod's most recent volume list showed it: the leak
    audit tells from these, on every tick, which no PV or claim uses
    (`core.resources.volume_leaks`), without listing again."""

    __tablename__ = "listed_volumes"

    volume_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(191))
    size_gb: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(32))
    datacenter: Mapped[str] = mapped_column(String(64))
    first_listed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When a list first showed it: a duplicate is collected once this is the orphan
    grace old."""
    leaked_since: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """Set while the audit finds it leaked (no PV names it, no claim waits for it), for
    `reconciler cost`; the tick's own audit does not read it."""


class ListedCluster(Base):
    """An Instant Cluster of ours that RunPod's list showed without its age (no member
    with a `createdAt`), and when a list first showed it: its graces count from then."""

    __tablename__ = "listed_clusters"

    cluster_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    first_listed_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ResourceList(Base):
    """When a RunPod list was last read and kept (`network-volumes`)."""

    __tablename__ = "resource_lists"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    listed_at: Mapped[datetime] = mapped_column(UTCDateTime())


class GoneBilled(Base):
    """An id RunPod billed that it neither listed nor answered for (`core.money.ghost_charges`):
    since when it is known gone, and what it was charged for hours after that."""

    __tablename__ = "gone_billed"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    """pod, network-volume or cluster."""
    resource_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    gone_since: Mapped[datetime] = mapped_column(UTCDateTime())
    charged_usd: Mapped[float | None] = mapped_column(Float)
    """Charged in the last hour read, which began after `gone_since` (set: a ghost
    charge, told on every tick)."""
    named_by: Mapped[str | None] = mapped_column(String(300))
    """The Kubernetes object that named the id when it was told, if one did."""


class ResourceSpendRecord(Base):
    """What RunPod charged for one of our network volumes or Instant Clusters in one hour
    (GET /v2/billing/network-volumes, GET /v2/billing/clusters)."""

    __tablename__ = "resource_spend_records"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    resource_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    bucket_start: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    bucket_end: Mapped[datetime] = mapped_column(UTCDateTime())
    total_usd: Mapped[float] = mapped_column(Float)


class BillingCoverage(Base):
    """How far billing has been read: whole hours up to `covered_until` are stored. One
    row per billing route: pods, network-volumes, clusters."""

    __tablename__ = "billing_reads"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    covered_until: Mapped[datetime] = mapped_column(UTCDateTime())
    read_at: Mapped[datetime] = mapped_column(UTCDateTime())


class NamespaceBudget(Base):
    """A namespace's caps as last read from its annotations, for `state show`."""

    __tablename__ = "namespace_budgets"

    namespace: Mapped[str] = mapped_column(String(253), primary_key=True)
    max_hourly_spend: Mapped[float | None] = mapped_column(Float)
    max_instances: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    """Why an annotation could not be read (creates in the namespace wait meanwhile)."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class UnownedInstance(Base):
    """An untagged instance nothing of ours claims, named as we would name a pod of the
    node: reported ("unowned, looks like ours"), never touched."""

    __tablename__ = "unowned_instances"

    instance_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(191))
    namespace: Mapped[str] = mapped_column(String(253))
    pod_name: Mapped[str] = mapped_column(String(253))
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())


class PodLog(Base):
    """The last lines of a pod's container log, kept when its instance ended, so that
    `kubectl logs` works after the instance is gone. Deleted with the pod's row."""

    __tablename__ = "pod_logs"

    pod_uid: Mapped[str] = mapped_column(
        ForeignKey("mappings.pod_uid", ondelete="CASCADE"), primary_key=True
    )
    instance_id: Mapped[str | None] = mapped_column(String(64))
    lines: Mapped[str] = mapped_column(Text)
    """JSON list of [RFC 3339 time, line], oldest first; the user's lines only."""
    truncated: Mapped[bool] = mapped_column(default=False)
    """True when older lines were left out to stay within the limits."""
    saved_at: Mapped[datetime] = mapped_column(UTCDateTime())


class MemberLog(Base):
    """The last lines of a gang pod's container log, kept before its Instant Cluster was
    deleted (a gang pod has no mapping row): deleted once the pod is gone from the node."""

    __tablename__ = "member_logs"

    pod_uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_uid: Mapped[str] = mapped_column(String(64))
    instance_id: Mapped[str] = mapped_column(String(64))
    """The cluster member whose log it was."""
    lines: Mapped[str] = mapped_column(Text)
    """JSON list of [RFC 3339 time, line], oldest first; the user's lines only."""
    truncated: Mapped[bool] = mapped_column(default=False)
    saved_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Tick(Base):
    """One row per reconcile tick, for `state show`, metrics and post-mortems."""

    __tablename__ = "ticks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    pods_seen: Mapped[int] = mapped_column(Integer, default=0)
    instances_seen: Mapped[int] = mapped_column(Integer, default=0)
    actions_planned: Mapped[int] = mapped_column(Integer, default=0)
    actions_applied: Mapped[int] = mapped_column(Integer, default=0)
    actions_failed: Mapped[int] = mapped_column(Integer, default=0)
    dry_run: Mapped[bool] = mapped_column(default=False)
    error_summary: Mapped[str | None] = mapped_column(Text)
    gpu_utilization: Mapped[str | None] = mapped_column(Text)
    """JSON {"<namespace>/<pod>": [0-1 per GPU]} as the tick's RunPod list showed it, for
    `state show`: written with the row each tick writes anyway, so it costs no write."""


class ActionRecord(Base):
    """The journal: one row per side effect, opened before the call and closed after it.

    A create's and a terminate's row (an instance's or a registry credential's) are
    committed before their call, so one left without `finished_at` marks a call a crash
    interrupted; the others are committed with the tick's next commit
    (docs/architecture.md §4).
    """

    __tablename__ = "actions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tick_id: Mapped[int | None] = mapped_column(
        ForeignKey("ticks.id", ondelete="SET NULL"), index=True
    )
    kind: Mapped[str] = mapped_column(String(32))
    pod_uid: Mapped[str | None] = mapped_column(String(64), index=True)
    resource_id: Mapped[str | None] = mapped_column(String(64))
    """The id of the RunPod resource the call concerns: an instance, a registry
    credential, an Instant Cluster, a network volume (docs/architecture.md §3, Cloud
    resources); a create's row gets the id it made when it closes."""
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    outcome: Mapped[str | None] = mapped_column(String(16))
    """ok, failed, or skipped; unset while the call is in flight."""
    error: Mapped[str | None] = mapped_column(Text)


class Lock(Base):
    """A named lease in the database: one writer per database at a time."""

    __tablename__ = "locks"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(253))
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class HostKey(Base):
    """An instance's SSH host key as first seen (trust on first use), so that a changed
    key is refused after a restart too. Kept after the instance is gone: RunPod never
    reuses an instance id, and a row is a line of text."""

    __tablename__ = "host_keys"

    instance_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(Text)
    """The key as `TYPE BASE64` (an authorized_keys line without a comment)."""
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())


class CatalogCopy(Base):
    """RunPod's GPU or CPU catalog as the reconciler last fetched it (once per
    --catalog-ttl), so that `reconciler offers` ranks from what the planner ranks
    from and sends RunPod nothing while it is fresh. One row per kind, overwritten."""

    __tablename__ = "catalogs"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    """`gpu`, `cluster` (GPU types with Instant Cluster stock) or `cpu`."""
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime())
    entries: Mapped[str] = mapped_column(Text)
    """The parsed entries as JSON (the domain's GpuType or CpuFlavor fields)."""
