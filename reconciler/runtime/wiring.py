"""Builds a running reconciler from settings: clients, store, engine and the writer lock."""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.repository import Store
from reconciler.core.config import Settings
from reconciler.runtime import logs
from reconciler.runtime.engine import Clock, Engine, utcnow

log = logging.getLogger(__name__)

LOCK_NAME = "reconciler"
# Short, because a SIGKILLed holder on another host is only outlived by expiry; the
# loop renews at half of it.
LOCK_TTL = 120.0


class LockHeld(RuntimeError):
    """Another reconciler writes to this database right now."""


@dataclass(frozen=True)
class Connections:
    database_url: str
    runpod_url: str
    runpod_api_key: str = dataclasses.field(repr=False)
    kubeconfig: str | None = None
    migrate: bool = True


def identity() -> str:
    """Who holds the lock: host and process, enough to find the other reconciler."""
    return f"{socket.gethostname()}/{os.getpid()}"


def open_store(database_url: str, upgrade: bool) -> Store:
    engine = db.make_engine(database_url)
    if upgrade:
        migrate.upgrade(engine)
    return Store(db.session_factory(engine))


def resolve_owner(settings: Settings, kube: KubeClient) -> Settings:
    """The owner id needs a cluster id; by default the kube-system namespace's UID."""
    if settings.cluster_id:
        return settings
    return dataclasses.replace(settings, cluster_id=kube.cluster_uid())


class LockKeeper:
    """Holds the database's writer lock, renewing it well before it expires."""

    def __init__(self, store: Store, clock: Clock, predecessor: str | None = None) -> None:
        self.store, self.clock = store, clock
        self.owner = identity()
        # A leader whose expired Lease we took: it stopped acting before the Lease ran
        # out (leader.py), so its lock is free to take without waiting out the TTL.
        self.predecessor = predecessor
        self._renewed = clock()

    def acquire(self) -> None:
        holder = self.store.acquire_lock(LOCK_NAME, self.owner, LOCK_TTL, self.clock())
        if holder is not None and (holder == self.predecessor or _dead_here(holder)):
            log.warning("taking over the lock of %s, %s", holder,
                        "the previous leader" if holder == self.predecessor
                        else "a dead process on this host")
            holder = self.store.acquire_lock(LOCK_NAME, self.owner, LOCK_TTL, self.clock(),
                                             dead_holder=holder)
        if holder is not None:
            raise LockHeld(f"another reconciler ({holder}) is writing to this database")
        self._renewed = self.clock()

    def renew_if_due(self) -> None:
        """One write per half TTL, not per tick: a steady tick writes only its tick row."""
        if (self.clock() - self._renewed).total_seconds() >= LOCK_TTL / 2:
            self.acquire()

    def release(self) -> None:
        self.store.release_lock(LOCK_NAME, self.owner)


def _dead_here(holder: str) -> bool:
    """Whether `holder` (host/pid) is a process of this host that no longer runs."""
    host, _, pid = holder.rpartition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextmanager
def connect(settings: Settings, conn: Connections, clock: Clock = utcnow,
            on_runpod_response: Callable[[str, int], None] | None = None) -> Iterator[Engine]:
    """An engine with its clients and store, not yet holding the writer lock: a standby
    replica must not take the lock before it leads."""
    logs.register_secret(conn.runpod_api_key)
    store = open_store(conn.database_url, conn.migrate)
    kube = KubeClient.from_config(conn.kubeconfig)
    runpod = RunPodClient(conn.runpod_api_key, conn.runpod_url, on_response=on_runpod_response)
    try:
        yield Engine(resolve_owner(settings, kube), runpod, kube, store, clock)
    finally:
        runpod.close()


@contextmanager
def writer_lock(engine: Engine, predecessor: str | None = None) -> Iterator[LockKeeper]:
    """The database's writer lock for as long as the block runs, renewed before ticks."""
    lock = LockKeeper(engine.store, engine.clock, predecessor)
    lock.acquire()
    engine.before_tick = lock.renew_if_due
    try:
        yield lock
    finally:
        lock.release()

