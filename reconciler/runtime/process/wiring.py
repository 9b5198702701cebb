"""Builds a running reconciler from settings: clients, store, engine, heartbeat and the
writer lock. `compose` is the one place an engine is put together; nothing changes it
afterwards (docs/architecture.md §2)."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.cluster import default_namespace
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.transport import MIB
from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.repository import Store
from reconciler.core.config import Settings
from reconciler.runtime import process_log
from reconciler.runtime.kubelet.sshkey import secret_identity
from reconciler.runtime.logs.system_events import StartupLines, SystemEvents
from reconciler.runtime.process.heartbeat import NodeHeartbeat
from reconciler.runtime.process.writer_lease import WriterLease, dead_here, identity
from reconciler.runtime.tick.engine import Clock, Engine, TickHooks, TickReport, utcnow

log = logging.getLogger(__name__)

LOCK_NAME = "reconciler"
# Short, because a SIGKILLed holder on another host is only outlived by expiry; the
# loop renews at half of it.
LOCK_TTL = 120.0


class LockHeld(RuntimeError):
    """Another reconciler writes to this database right now."""


class LockNotHeld(RuntimeError):
    """A tick was asked for while this process does not hold the writer lock."""


@dataclass(frozen=True)
class Connections:
    database_url: str
    runpod_url: str
    runpod_api_key: str = dataclasses.field(repr=False)
    kubeconfig: str | None = None
    migrate: bool = True
    context: str | None = None
    """The kubeconfig context to use instead of its current-context."""


def open_store(database_url: str, upgrade: bool, node: str | None = None) -> Store:
    """The store, its schema checked (and upgraded unless told not to), reading and
    writing the rows of `node` only (None: every row, for the CLI's views). Raises
    SchemaError, DatabaseURLError or SQLAlchemy's DatabaseError."""
    engine = db.make_engine(database_url)
    migrate.check_schema(engine, db.location(database_url), will_upgrade=upgrade)
    if upgrade:
        migrate.upgrade(engine)
    return Store(db.session_factory(engine), node)


def lock_name(node: str) -> str:
    """The database lock of a node's writers: one per node, so that several nodes share
    a database, each with its own rows (the column holds 64 characters)."""
    name = f"{LOCK_NAME}/{node}"
    if len(name) <= 64:
        return name
    return f"{LOCK_NAME}/{hashlib.sha256(node.encode()).hexdigest()[:40]}"


def resolve_owner(settings: Settings, kube: KubeClient) -> Settings:
    """The owner id needs a cluster id; by default the kube-system namespace's UID."""
    if settings.node.cluster_id:
        return settings
    return settings.with_values(cluster_id=kube.cluster.uid())


def with_ssh_key(settings: Settings, kube: KubeClient) -> Settings:
    """The settings with the public half of the reconciler's SSH key, when a Secret
    holds it (made there on first start; a key file was read by the command already)."""
    if settings.ssh.key_file or not settings.ssh.key_secret:
        return settings
    identity = secret_identity(kube, default_namespace(), settings.ssh.key_secret)
    return settings.with_values(ssh_public_key=identity.public_line)


class LockKeeper:
    """Holds the database's writer lock, renewing it well before it expires."""

    def __init__(self, store: Store, clock: Clock, name: str = LOCK_NAME) -> None:
        self.store, self.clock, self.name = store, clock, name
        self.owner = identity()
        self._renewed = clock()
        self._held = False

    def acquire(self, predecessor: str | None = None) -> None:
        """Take the lock, or raise LockHeld. `predecessor` is a leader whose expired Lease
        we took: it stopped acting before the Lease ran out (leader.py), so its lock is
        free to take without waiting out the TTL."""
        holder = self.store.locks.acquire(self.name, self.owner, LOCK_TTL, self.clock())
        if holder is not None and (holder == predecessor or dead_here(holder)):
            log.warning(
                "taking over the lock of %s, %s",
                holder,
                "the previous leader" if holder == predecessor else "a dead process on this host",
            )
            holder = self.store.locks.acquire(
                self.name, self.owner, LOCK_TTL, self.clock(), dead_holder=holder
            )
        if holder is not None:
            raise LockHeld(f"another reconciler ({holder}) is writing to this database")
        self._renewed, self._held = self.clock(), True

    def renew_if_due(self) -> None:
        """Before each tick. One write per half TTL, not per tick: a steady tick writes
        only its tick row. Raises LockNotHeld when the lock was never taken or released."""
        if not self._held:
            raise LockNotHeld("not holding the database's writer lock: no tick")
        if (self.clock() - self._renewed).total_seconds() >= LOCK_TTL / 2:
            self.acquire()

    def release(self) -> None:
        self._held = False
        self.store.locks.release(self.name, self.owner)


class RunMode(enum.Enum):
    """How a process keeps the virtual node alive (docs/architecture.md §5)."""

    ONCE = "once"
    """No heartbeat schedule (`sync --once`, the sandbox): each tick keeps the node alive."""
    LOOP = "loop"
    """The loop beats on its own schedule; its ticks leave the node alone."""


@dataclass(frozen=True)
class Reconciler:
    """One reconciler process, composed: the engine, its node heartbeat, its writer lock."""

    engine: Engine
    heartbeat: NodeHeartbeat
    lock: LockKeeper
    writer_lease: WriterLease
    """The node's writer Lease: taken by every writer before it acts
    (docs/architecture.md §4, One writer per node)."""


def compose(
    settings: Settings,
    runpod: RunPodClient,
    kube: KubeClient,
    store: Store,
    clock: Clock,
    mode: RunMode,
    lock: LockKeeper | None = None,
    after_tick: Callable[[Engine, TickReport], None] | None = None,
    writer_lease: WriterLease | None = None,
    startup_client: Callable[[], RunPodClient] | None = None,
    startup_lines: bool = False,
    services: bool | None = None,
) -> tuple[Engine, NodeHeartbeat]:
    """The engine and its heartbeat, with what runs around each tick: the writer lock's
    renewal first (when there is a lock), the node's writer Lease kept before the tick
    and each action (when there is a writer Lease), the heartbeat in the ticks of
    `RunMode.ONCE`, starting instances' system lines as Events (with `startup_lines`: a
    stream each on a client from `startup_client`, else a read in the tick), and
    `after_tick` last. `services` (by default only in `RunMode.LOOP`, the one process that
    lives to carry tunnels): the pods' Services; without, no link variables either, as
    nothing would listen where they point."""
    if not (mode is RunMode.LOOP if services is None else services):
        settings = settings.with_values(service_forwards_per_pod=0)
    heartbeat = NodeHeartbeat(kube, settings, clock)
    events = SystemEvents(kube)
    startup = StartupLines(events, startup_client) if startup_lines else None
    hooks = TickHooks(
        heartbeat=heartbeat.keep_alive if mode is RunMode.ONCE else None, startup=startup
    )
    if lock is not None:
        hooks = dataclasses.replace(hooks, before=lock.renew_if_due)
    if writer_lease is not None:
        hooks = dataclasses.replace(
            hooks,
            before_action=writer_lease.keep,
            creates_held=writer_lease.creates_held,
            unrecorded_creates=writer_lease.unrecorded_creates,
            # A run of `--once` ends by releasing the Lease: its creates must be on their
            # pods by then (runtime/process/writer_lease.py); the loop's next tick mirrors
            # them anyway.
            annotate_created=mode is RunMode.ONCE,
        )
    if after_tick is not None:
        hooks = dataclasses.replace(hooks, after=after_tick)
    return Engine(settings, runpod, kube, store, clock, hooks, events), heartbeat


@contextmanager
def connect(
    settings: Settings,
    conn: Connections,
    mode: RunMode,
    clock: Clock = utcnow,
    on_runpod_response: Callable[[str, int], None] | None = None,
    after_tick: Callable[[Engine, TickReport], None] | None = None,
    read_only: bool = False,
) -> Iterator[Reconciler]:
    """A reconciler with its clients and store, not yet holding the writer lock: a standby
    replica must not take the lock before it leads. `read_only` (a dry run): no
    migration, and ticks that need no lock, since they write nothing. Starting
    instances' system lines show as Events (on a client of their own per stream in the
    loop, which is closed with it)."""
    process_log.register_secret(conn.runpod_api_key)
    store = open_store(conn.database_url, conn.migrate and not read_only, settings.node.name)
    kube = KubeClient.from_config(conn.kubeconfig, conn.context)
    runpod = RunPodClient(
        conn.runpod_api_key,
        conn.runpod_url,
        on_response=on_runpod_response,
        max_answer_bytes=settings.caps.runpod_max_answer_mib * MIB,
    )
    lock = LockKeeper(store, clock, lock_name(settings.node.name))
    engine: Engine | None = None
    try:
        settings = with_ssh_key(resolve_owner(settings, kube), kube)
        writer_lease = WriterLease(
            kube,
            settings.node.name,
            clock,
            time.monotonic,
            hold_seconds=settings.timing.create_grace_time,
            steady=lambda: runpod.served_now() or clock(),  # the engine's clock
        )
        engine, heartbeat = compose(
            settings,
            runpod,
            kube,
            store,
            clock,
            mode,
            None if read_only else lock,
            after_tick,
            None if read_only else writer_lease,
            # The loop holds a stream per starting pod; a run of `--once` reads in its tick.
            partial(
                RunPodClient,
                conn.runpod_api_key,
                conn.runpod_url,
                on_response=on_runpod_response,
            )
            if mode is RunMode.LOOP
            else None,
            startup_lines=not read_only,
        )
        yield Reconciler(engine, heartbeat, lock, writer_lease)
    finally:
        if engine is not None and engine.hooks.startup is not None:
            engine.hooks.startup.stop()
        runpod.close()


@contextmanager
def holding(lock: LockKeeper, predecessor: str | None = None) -> Iterator[LockKeeper]:
    """The database's writer lock for as long as the block runs."""
    lock.acquire(predecessor)
    try:
        yield lock
    finally:
        lock.release()


@contextmanager
def holding_writer_lease(writer_lease: WriterLease) -> Iterator[WriterLease]:
    """The node's writer Lease for as long as the block runs (the engine keeps it before
    each action). Raises WriterHeld when another writer acts for the node."""
    writer_lease.acquire()
    try:
        yield writer_lease
    finally:
        writer_lease.release()
