"""One `reconciler sync --once` as a real subprocess, run clean, armed or killed.

A tick is armed through `RECONCILER_CRASH_AT` (the process dies with exit code 137 when
the point is reached), or killed with SIGKILL after a real delay, or left alone. The
journal (`actions` table) is read with the standard library's sqlite3 between ticks,
when no reconciler holds the file, and kept across database deletions.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.runtime.tick.crashpoints import CRASH_EXIT_CODE, ENV_VAR
from tests.chaos.world import API_KEY, SimHost

# A clean tick that takes longer than this is a hang worth failing the campaign for.
TICK_TIMEOUT = 90.0
# Real seconds: short, because the subprocess itself measures grace periods in real time;
# the create grace longer than the chained successors' list lag (workload.CHAIN_LAG),
# since the hold on creates after a writer died lasts it.
CREATE_GRACE = 3.0
ORPHAN_GRACE = 0.5
# The one line a writer prints when another one holds the node's writer Lease.
REFUSAL = "acts for node"
# Pods must not fail for waiting while faults are injected; "stuck" is judged in ticks.
MAX_PENDING = 3600.0


@dataclass(frozen=True)
class TickPlan:
    crash_at: str | None = None
    """A crashpoints spec such as "after-create:2"."""
    kill_after: float | None = None
    """Real seconds after which the process gets SIGKILL."""

    @property
    def point(self) -> str | None:
        return self.crash_at.partition(":")[0] if self.crash_at else None


@dataclass
class TickResult:
    plan: TickPlan
    returncode: int
    seconds: float
    report: dict[str, Any] | None
    refused: bool = False
    """Refused at start because another writer held the node's writer Lease."""
    hung: bool = False
    """Killed for running past TICK_TIMEOUT without a kill planned: a failure, not chaos."""

    @property
    def crashed(self) -> bool:
        """Died at its armed crash point."""
        return self.returncode == CRASH_EXIT_CODE

    @property
    def killed(self) -> bool:
        """SIGKILLed as planned."""
        return self.returncode == -9 and not self.hung

    @property
    def died(self) -> bool:
        return self.crashed or self.returncode == -9

    @property
    def planned(self) -> dict[str, int]:
        return dict((self.report or {}).get("planned") or {})


@dataclass
class Reconciler:
    """How to run the reconciler of one campaign run against the simulators."""

    host: SimHost
    workdir: Path
    node: str
    cluster_id: str
    database: str = ""
    """The database file's name; by default the node's (a second writer has its own)."""
    tick_timeout: float = TICK_TIMEOUT
    create_grace: float = CREATE_GRACE
    """--create-grace-time: how long a create in doubt, or creates after a takeover, wait."""
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / f"{self.database or self.node}.log"

    @property
    def owner(self) -> str:
        return f"{self.cluster_id}/{self.node}"

    @property
    def db_path(self) -> Path:
        return self.workdir / f"{self.database or self.node}.db"

    def env(self, crash_at: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_")}
        env.update(
            RUNPOD_API_KEY=API_KEY,
            RECONCILER_NODE_NAME=self.node,
            RECONCILER_CLUSTER_ID=self.cluster_id,
            RECONCILER_CREATE_GRACE_TIME=str(self.create_grace),
            RECONCILER_ORPHAN_GRACE_TIME=str(ORPHAN_GRACE),
            RECONCILER_MAX_PENDING_TIME=str(MAX_PENDING),
        )
        if crash_at:
            env[ENV_VAR] = crash_at
        return env

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "reconciler",
            "--database-url",
            f"sqlite:///{self.db_path}",
            "sync",
            "--once",
            "--output",
            "json",
            "--kubeconfig",
            str(self.host.kubeconfig),
            "--runpod-url",
            self.host.runpod_url,
        ]

    def tick(self, plan: TickPlan) -> TickResult:
        started = time.monotonic()
        with open(self.log_path, "a") as log:
            log.write(f"--- tick {plan}\n")
            log.flush()
            process = subprocess.Popen(
                self.command(),
                env=self.env(plan.crash_at),
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            hung = False
            try:
                out, _ = process.communicate(timeout=plan.kill_after or self.tick_timeout)
            except subprocess.TimeoutExpired:
                hung = plan.kill_after is None
                process.kill()  # SIGKILL, this one process only
                out, _ = process.communicate()
            log.write(f"--- exit {process.returncode}: {out.strip()}\n")
        refused = process.returncode == 1 and REFUSAL in self.log_tail(2)
        return TickResult(
            plan, process.returncode, time.monotonic() - started, _report(out), refused, hung
        )

    def log_tail(self, lines: int = 12) -> str:
        """The end of the log: a failed tick's own lines, for a violation's message."""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def delete_database(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)


def _report(out: str) -> dict[str, Any] | None:
    try:
        return dict(json.loads(out))
    except ValueError:
        return None


def expire_lock(db_path: Path) -> bool:
    """Expire the writer lock a dead tick left behind; True if there was one.

    A process that dies holds the lock until its TTL (`LOCK_TTL` in runtime/process/wiring.py,
    120 s of wall time) runs out, unless the next writer sees it is a dead process of
    this host (`dead_here`), which a reused pid can hide: this stands in for that wait.
    """
    if not db_path.exists():
        return False
    with closing(sqlite3.connect(db_path)) as conn:
        try:
            changed = conn.execute("UPDATE locks SET expires_at = acquired_at").rowcount
        except sqlite3.OperationalError:  # killed before the schema was made
            return False
        conn.commit()
    return changed > 0


# --- the journal ------------------------------------------------------------------------


@dataclass(frozen=True)
class JournalRow:
    generation: int
    """Which database file it came from: tick ids start again after a deletion."""
    id: int
    tick_id: int | None
    tick_finished: bool
    kind: str
    pod_uid: str | None
    resource_id: str | None
    finished: bool
    outcome: str | None


def read_journal(db_path: Path, generation: int = 0) -> list[JournalRow]:
    """Every `actions` row with whether its tick finished; [] without a database."""
    if not db_path.exists():
        return []
    query = (
        "SELECT a.id, a.tick_id, t.finished_at IS NOT NULL, a.kind, a.pod_uid, "
        "a.resource_id, a.finished_at IS NOT NULL, a.outcome "
        "FROM actions a LEFT JOIN ticks t ON t.id = a.tick_id ORDER BY a.id"
    )
    with closing(sqlite3.connect(db_path)) as conn:
        try:
            rows = conn.execute(query).fetchall()
        except sqlite3.OperationalError:  # killed before the schema was made
            return []
    return [
        JournalRow(generation, r[0], r[1], bool(r[2]), r[3], r[4], r[5], bool(r[6]), r[7])
        for r in rows
    ]
