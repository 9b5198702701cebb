"""The database writer lock: one holder at a time, renewal, expiry and release."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.runtime.process.wiring import (
    LOCK_NAME,
    LOCK_TTL,
    LockHeld,
    LockKeeper,
    LockNotHeld,
    open_store,
)

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def test_second_writer_is_refused_until_the_lock_expires(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", upgrade=True)
    assert store.locks.acquire(LOCK_NAME, "a", LOCK_TTL, T0) is None
    assert store.locks.acquire(LOCK_NAME, "b", LOCK_TTL, T0 + timedelta(seconds=10)) == "a"
    assert store.locks.acquire(LOCK_NAME, "a", LOCK_TTL, T0 + timedelta(seconds=20)) is None
    expired = T0 + timedelta(seconds=20 + LOCK_TTL + 1)
    assert store.locks.acquire(LOCK_NAME, "b", LOCK_TTL, expired) is None


def test_release_lets_the_next_writer_in(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", upgrade=True)
    store.locks.acquire(LOCK_NAME, "a", LOCK_TTL, T0)
    store.locks.release(LOCK_NAME, "a")
    assert store.locks.acquire(LOCK_NAME, "b", LOCK_TTL, T0) is None


def test_keeper_renews_at_half_ttl_and_reports_a_lost_lock(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", upgrade=True)
    now = [T0]
    keeper = LockKeeper(store, lambda: now[0])
    keeper.acquire()
    now[0] = T0 + timedelta(seconds=LOCK_TTL * 0.75)
    keeper.renew_if_due()  # renewed: a rival arriving after the first TTL is refused
    now[0] = T0 + timedelta(seconds=LOCK_TTL + 1)
    assert store.locks.acquire(LOCK_NAME, "rival", LOCK_TTL, now[0]) == keeper.owner
    keeper.release()
    with pytest.raises(LockNotHeld):
        keeper.renew_if_due()  # released: no tick may run on it
    store.locks.acquire(LOCK_NAME, "rival", LOCK_TTL, now[0])
    with pytest.raises(LockHeld, match="rival"):
        keeper.acquire()


def test_the_new_leader_takes_the_lock_of_the_leader_whose_lease_it_took(tmp_path: Path) -> None:
    """Across hosts a dead leader's process cannot be checked; its expired Lease proves it
    stopped acting, so its successor need not wait out the lock's TTL."""
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", upgrade=True)
    store.locks.acquire(LOCK_NAME, "other-host/41", LOCK_TTL, T0)
    with pytest.raises(LockHeld, match="other-host/41"):
        LockKeeper(store, lambda: T0).acquire()
    with pytest.raises(LockHeld, match="other-host/41"):
        LockKeeper(store, lambda: T0).acquire(predecessor="third-host/7")
    successor = LockKeeper(store, lambda: T0)
    successor.acquire(predecessor="other-host/41")
    assert store.locks.acquire(LOCK_NAME, "other-host/41", LOCK_TTL, T0) == successor.owner
