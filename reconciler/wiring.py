"""Builds a running reconciler from settings: clients, store, engine and the writer lock."""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from reconciler import logs
from reconciler.config import Settings
from reconciler.engine import Clock, Engine, utcnow
from reconciler.kube.client import KubeClient
from reconciler.runpod.client import RunPodClient
from reconciler.store import db, migrate
from reconciler.store.repository import Store

log = logging.getLogger(__name__)

LOCK_NAME = "reconciler"
LOCK_TTL = 300.0


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


@contextmanager
def reconciler(settings: Settings, conn: Connections,
               clock: Clock = utcnow) -> Iterator[Engine]:
    """An engine holding the database's writer lock for as long as the block runs."""
    logs.register_secret(conn.runpod_api_key)
    store = open_store(conn.database_url, conn.migrate)
    kube = KubeClient.from_config(conn.kubeconfig)
    runpod = RunPodClient(conn.runpod_api_key, conn.runpod_url)
    settings = resolve_owner(settings, kube)
    holder = store.acquire_lock(LOCK_NAME, identity(), LOCK_TTL, clock())
    if holder is not None:
        raise LockHeld(f"another reconciler ({holder}) is writing to this database")
    try:
        yield Engine(settings, runpod, kube, store, clock)
    finally:
        store.release_lock(LOCK_NAME, identity())
        runpod.close()
