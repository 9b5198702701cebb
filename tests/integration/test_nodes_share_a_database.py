"""Rows belong to a node (docs/architecture.md §4, "One writer per node"): several virtual
nodes' reconcilers on one database (SQLite in CronJob mode, PostgreSQL in either mode;
`test_postgres.py` runs the same on PostgreSQL) each act on their own rows only, and
each node has a database lock of its own.

Found on main: two nodes' CronJobs on one database. The lock was one row for everyone,
released after each run, so the runs alternated without an error, and node B's run
marked node A's rows terminated (their pods are not on node B); node A then terminated
its own running instance and failed its pod InstanceLost, and the same the other way."""

from __future__ import annotations

from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.process.wiring import (
    LockKeeper,
    RunMode,
    compose,
    holding,
    lock_name,
    open_store,
)
from reconciler.runtime.tick.engine import Engine

OTHER = "virtual-runpod-b"


def other_node(box: Sandbox) -> Engine:
    """A second node's reconciler on the sandbox's database and both simulators."""
    settings = box.settings.with_values(node_name=OTHER)
    store = open_store(box.database_url, upgrade=True, node=OTHER)
    engine, _ = compose(settings, box.runpod, box.kube, store, box.wall_clock, RunMode.ONCE)
    return engine


def add_pod_on(box: Sandbox, name: str, node: str) -> None:
    extra = {"nodeName": node}
    box.add_pod(name, extra_spec=extra)


def phases(box: Sandbox) -> dict[str, str]:
    return {n: (box.pod(n) or {}).get("status", {}).get("phase", "") for n in ("on-a", "on-b")}


def two_nodes_leave_each_other_alone(box: Sandbox) -> None:
    b = other_node(box)
    box.add_pod("on-a")
    add_pod_on(box, "on-b", OTHER)
    for _ in range(4):  # the CronJobs' runs alternate
        box.tick()
        b.tick()
        box.advance(15)
    assert phases(box) == {"on-a": "Running", "on-b": "Running"}
    assert len(box.runpod_sim.instances) == 2
    deletes = [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]
    assert deletes == []
    assert [r.name for r in box.store.load_rows()] == ["on-a"]
    assert [r.name for r in b.store.load_rows()] == ["on-b"]


def test_two_nodes_on_one_database_leave_each_other_alone(box: Sandbox) -> None:
    two_nodes_leave_each_other_alone(box)


def test_each_node_has_a_database_lock_of_its_own(box: Sandbox) -> None:
    """A node's loop holds its lock for as long as it runs: another node's must not be
    refused for it (a second writer of the same node still is)."""
    mine = LockKeeper(box.store, box.clock.now, lock_name(box.settings.node.name))
    theirs = LockKeeper(box.store, box.clock.now, lock_name(OTHER))
    with holding(mine), holding(theirs):
        assert mine.name != theirs.name
