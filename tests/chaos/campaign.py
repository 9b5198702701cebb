"""Kill-anywhere and fault campaign: the crash-safety promise, end to end.

Each run starts a fresh node, namespace, owner id and database against the simulators
(one `simhost.py` process per campaign), seeds foreign instances, then for a number of
chaos ticks: users act, a fault may be injected, and `reconciler sync --once` runs as a
real subprocess, armed at the least-exercised crash point (`RECONCILER_CRASH_AT`),
SIGKILLed after a random real delay, or left alone; now and then a second writer (its
own database, same node) runs alongside it, and the node's writer Lease must keep them
from acting at once. A neighbour, the reconciler of a second virtual node of the same
cluster (its own node, database and owner; the same RunPod account), ticks alongside
about half the ticks, now and then dying just after a volume's POST with its database
lost: both see every Immediate-binding claim, and each claim must get one volume. In
database-chaos runs the SQLite
file is deleted at random moments (after a tick, often one that was just killed). Then
the faults stop and clean ticks run until both worlds agree. After every run the
invariants of `invariants.py` are checked; `Snapshot.unconverged` defines agreement.

Clocks: `simhost.py` runs both simulators on a clock that follows the wall clock, which
is what the reconciler subprocess reads, so grace periods (set to ~1 s via
RECONCILER_* env), boot delays, listing lag and instance ages share one time line.

Long mode: `python tests/chaos/campaign.py --runs 12 --seed 7` prints the table.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tests.chaos` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reconciler.core.resources.volume_objects import volume_name
from reconciler.runtime.tick.crashpoints import POINTS
from tests.chaos import invariants
from tests.chaos.invariants import History
from tests.chaos.ticks import (
    CREATE_GRACE,
    JournalRow,
    Reconciler,
    TickPlan,
    TickResult,
    expire_lock,
    read_journal,
)
from tests.chaos.workload import BITES, CHAIN_FAULT, HOSTILE_FAULT, STEER, Workload
from tests.chaos.world import SimHost, Snapshot, sim_host

MAX_SETTLE_TICKS = 12
# Clean ticks an orphan may outlive once faults stop: two sightings, terminate, confirm.
MAX_ORPHAN_SETTLE_TICKS = 4
FAULT_CHANCE = 0.5
# A second `sync --once` for the same node with its own database, started with the tick
# (a CronJob next to a Deployment, a manual run): the node's writer Lease must keep the
# two from acting at once.
SECOND_WRITER_CHANCE = 0.2
SECOND_WRITER_GENERATION = 1_000
DB_DELETE_CHANCE = 0.2
# Short `sync --once` runs, each on a fresh database, after a writer killed just after a
# create while the list lags: each must keep the hold on creates, or a second writer
# with an empty database makes the instance again.
CHAINED_SUCCESSORS = 2
CHAIN_GENERATION = 2_000
INITIAL_PODS = 3
# A writer that died between a volume's POST and its PV: how often the user deletes the
# claim before the next tick (the provisioner's hold must keep it).
ABANDON_AFTER_CRASH = 0.6
# Ticks after the worlds agree in which rows may still catch up (terminated confirmed).
ROW_TAIL_TICKS = 2
# The second virtual node's reconciler: how often it ticks alongside a chaos tick, how
# often such a tick dies just after a volume's POST, and how often its database is lost
# after that.
NEIGHBOUR_CHANCE = 0.5
NEIGHBOUR_CRASH_CHANCE = 0.25
NEIGHBOUR_DB_LOSS_CHANCE = 0.5
NEIGHBOUR_GENERATION = 3_000
# A running gang's rank 0 is read at most once per --gang-result-interval (60 s by
# default): a gang whose rank 0 exited 0 in the last rounds may be read that long after.
# Clean ticks go on until every such gang's pods ended, for at most this long.
RESULT_WAIT_SECONDS = 75.0


@dataclass
class RunResult:
    index: int
    seed: int
    db_chaos: bool
    ticks: int = 0
    armed: Counter[str] = field(default_factory=Counter)
    fired: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    hung: int = 0
    locks_expired: int = 0
    db_deletions: int = 0
    second_writers: int = 0
    """Ticks run alongside a second writer with its own database."""
    faults: Counter[str] = field(default_factory=Counter)
    faults_biting: Counter[str] = field(default_factory=Counter)
    """Faults that met the state they need (the chain: its writer died after a create)."""
    settle_ticks: int | None = None
    duplicates_seen: int = 0
    """Pods given a second instance (RunPod's request log), explained or not."""
    duplicates_explained: int = 0
    reruns_explained: int = 0
    """Of those explained, the ones made after the workload ended the in-doubt
    instance's work: a re-run the lagging list hid from the writer."""
    duplicates_healed: bool = True
    orphan_seconds: float = 0.0
    clusters_made: int = 0
    """Instant Clusters RunPod answered 201 for."""
    volumes_made: int = 0
    """Network volumes RunPod answered 201 for."""
    volume_requests: Counter[str] = field(default_factory=Counter)
    """Requests to /v2/network-volumes (and one volume) by method: what storage cost."""
    neighbour_ticks: int = 0
    """Ticks of the second virtual node's reconciler."""
    neighbour_crashes: int = 0
    neighbour_volumes: int = 0
    """Of `volumes_made`, those the neighbour made (Immediate claims it provisioned)."""
    gangs_succeeded: int = 0
    """Jobs whose gang's rank 0 exited 0 by the workload's hand."""
    violations: list[tuple[str, str]] = field(default_factory=list)

    def violate(self, invariant: str, messages: list[str]) -> None:
        self.violations += [(invariant, m) for m in messages]


INVARIANTS = (
    "ticks-run",
    "converged",
    "foreign-untouched",
    "terminate-by-delete",
    "journal",
    "finished-not-rerun",
    "no-unexplained-duplicate",
    "orphans-bounded",
    "steady-tick",
    "hostile-namespace",
    "no-duplicate-cluster",
    "finished-gang-not-rerun",
    "no-leaked-cluster",
    "no-duplicate-volume",
    "no-leaked-volume",
    "request-log-whole",
)


class Run:
    """One campaign run: setup, chaos ticks, settle ticks, invariants."""

    def __init__(
        self,
        host: SimHost,
        workdir: Path,
        index: int,
        seed: int,
        db_chaos: bool,
        chaos_ticks: int,
        coverage: Counter[str],
    ) -> None:
        self.rng = random.Random(seed)
        self.host, self.chaos_ticks, self.coverage = host, chaos_ticks, coverage
        node = f"chaos-{index}"
        self.reconciler = Reconciler(host, workdir, node, f"cluster-{index}-{seed}")
        self.second = Reconciler(
            host, workdir, node, f"cluster-{index}-{seed}", database=f"{node}-second"
        )
        self.neighbour = Reconciler(host, workdir, f"{node}-nb", f"cluster-{index}-{seed}")
        self.neighbour_archived: list[JournalRow] = []
        self.workload = Workload(host, f"run-{index}", node, self.rng)
        self.result = RunResult(index, seed, db_chaos)
        self.history = History()
        self.archived: list[JournalRow] = []
        self.chained: list[Reconciler] = []
        """The short successors run so far, each with a database of its own."""
        self.died_spans: list[tuple[int, int]] = []
        """Kubernetes requests (start, end in the simulator's log) of ticks that died."""
        self.foreign: set[str] = set()
        self.foreign_volumes: set[str] = set()
        self._last_look = time.monotonic()

    def execute(self) -> RunResult:
        self._setup()
        self._chaos()
        self._settle()
        self._check()
        return self.result

    # --- phases ----------------------------------------------------------------------

    def _setup(self) -> None:
        self.host.runpod("POST", "reset")
        self.host.ensure_namespace(self.workload.namespace)
        for _ in range(INITIAL_PODS):
            self.workload.add_pod()
        self.foreign = self.workload.foreign_instances()
        self.workload.add_storage()
        self.foreign_volumes = self.workload.foreign_volumes()

    def _chaos(self) -> None:
        tick = 0
        while tick < self.chaos_ticks or (self._uncovered() and tick < 3 * self.chaos_ticks):
            plan = self._choose_plan(covering=tick >= self.chaos_ticks)
            snap = self._look()
            steer = STEER.get(plan.point or "")
            if steer in ("add", "add-private", "add-gang") and not self.workload.keep_bounded(snap):
                steer = "end"
            self.workload.step(snap, steer)
            fault = self.workload.inject_fault() if self.rng.random() < FAULT_CHANCE else None
            if fault == "create-then-hang" and plan.crash_at is None:
                plan = TickPlan(kill_after=self.rng.uniform(0.9, 3.5))
            with self._neighbour_alongside(self.rng.random() < NEIGHBOUR_CHANCE):
                self._chaos_tick(plan, fault)
            self._maybe_delete_database()
            tick += 1

    def _chaos_tick(self, plan: TickPlan, fault: str | None) -> None:
        if fault == CHAIN_FAULT:
            self._wait_out_holds()  # the writer to be killed must create
            self.workload.add_pod()
            killed = self._tick(TickPlan(crash_at="after-create:1"))
            self._record(killed)
            self.workload.bites[CHAIN_FAULT] += killed.crashed
            self._chain()
        elif self.rng.random() < SECOND_WRITER_CHANCE:
            self._record(self._tick_with_a_second_writer(plan))
        else:
            result = self._tick(plan)
            self._record(result)
            crashed_provisioning = result.crashed and plan.point == "after-volume-create"
            if crashed_provisioning and self.rng.random() < ABANDON_AFTER_CRASH:
                self.workload.abandon_claim(self._look())
            if fault == HOSTILE_FAULT:
                problems = invariants.hostile_namespace_violations(result)
                self.result.violate("hostile-namespace", problems)

    @contextmanager
    def _neighbour_alongside(self, ticking: bool, clean: bool = False) -> Iterator[None]:
        """The second virtual node's reconciler ticks while the body runs (if `ticking`):
        now and then armed just after a volume's POST (unless `clean`), its database then
        lost at times, as a node's reconciler that died and came back on a fresh disk."""
        if not ticking:
            yield
            return
        armed = not clean and self.rng.random() < NEIGHBOUR_CRASH_CHANCE
        plan = TickPlan(crash_at="after-volume-create:1") if armed else TickPlan()
        lose_db = self.rng.random() < NEIGHBOUR_DB_LOSS_CHANCE
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(self.neighbour.tick, plan)
            yield
            result = running.result()
        self.result.neighbour_ticks += 1
        self.result.hung += result.hung
        self.result.violate(
            "ticks-run",
            [
                f"neighbour: {p}; its log ends:\n{self.neighbour.log_tail()}"
                for p in invariants.tick_violations(result, contended=False)
            ],
        )
        if result.died:
            expire_lock(self.neighbour.db_path)
        if result.crashed:
            self.result.neighbour_crashes += 1
            if lose_db:
                generation = NEIGHBOUR_GENERATION + self.result.neighbour_crashes
                self.neighbour_archived += read_journal(self.neighbour.db_path, generation)
                self.neighbour.delete_database()
            if self.rng.random() < ABANDON_AFTER_CRASH:
                self.workload.abandon_claim(self._look())

    def _chain(self) -> None:
        """Short runs one after another, each on a fresh database, inside the term of the
        writer just killed, then the list's lag off (what it hid shows in time)."""
        for _ in range(CHAINED_SUCCESSORS):
            successor = Reconciler(
                self.host,
                self.reconciler.workdir,
                self.reconciler.node,
                self.reconciler.cluster_id,
                database=f"{self.reconciler.node}-chain-{len(self.chained)}",
            )
            self.chained.append(successor)
            self._tick(TickPlan(), successor)
        self.workload.lag(0)

    def _wait_out_holds(self) -> None:
        """A clean tick (it takes over a writer that died, and holds creates for the
        create grace), then the create grace: no hold is left (it ends on its own;
        nothing makes RunPod's list catch up)."""
        self._tick(TickPlan())
        time.sleep(CREATE_GRACE + 0.5)

    def _settle(self) -> None:
        self.workload.lag(0)
        self.workload.calm_namespace()
        orphans_gone: int | None = None
        for settle in range(1, MAX_SETTLE_TICKS + 1):
            # A hold on creates (a killed writer's successor's, or one passed on in the
            # Lease) lasts the create grace: clean ticks outlast it.
            with self._neighbour_alongside(True, clean=True):
                self._tick(TickPlan())
            snap = self._look()
            if orphans_gone is None and not snap.orphans():
                orphans_gone = settle
            if not snap.unconverged():
                self.result.settle_ticks = settle
                break
        left = [i["id"] for i in self._look().orphans()]
        self.result.violate(
            "orphans-bounded",
            invariants.orphan_violations(orphans_gone, MAX_ORPHAN_SETTLE_TICKS, left),
        )
        if self.result.settle_ticks is not None:
            self._await_gang_results()
            self._check_steady()

    def _await_gang_results(self) -> None:
        """Clean ticks while a gang whose rank 0 exited 0 still has a live pod (its
        result not read yet, as the cadence allows), up to RESULT_WAIT_SECONDS."""
        deadline = time.monotonic() + RESULT_WAIT_SECONDS
        waited = False
        while time.monotonic() < deadline:
            snap = self._look()
            if not any(snap.live(uid) for uid in self.workload.succeeded_pods):
                break
            waited = True
            time.sleep(1.0)
            self._tick(TickPlan())
        # The ended gang's cluster goes: the worlds agree again before the steady ticks.
        for _ in range(MAX_SETTLE_TICKS if waited else 0):
            if not self._look().unconverged():
                return
            self._tick(TickPlan())

    def _check_steady(self) -> None:
        """Rows may trail the worlds (a terminate is confirmed a tick later), then nothing.

        docs/architecture.md §2: a steady tick writes nothing; the plan must reach that
        fixed point within `ROW_TAIL_TICKS` and stay there.
        """
        plans = [self._steady_tick() for _ in range(ROW_TAIL_TICKS + 1)]
        self.result.violate("steady-tick", invariants.steady_violations(plans))
        theirs = [self.neighbour.tick(TickPlan()).planned for _ in range(ROW_TAIL_TICKS + 1)]
        self.result.violate(
            "steady-tick", [f"neighbour: {p}" for p in invariants.steady_violations(theirs)]
        )

    def _steady_tick(self) -> dict[str, int]:
        """One clean tick's plan, less the row save of a running gang's periodic result
        read (once per --gang-result-interval, 60 s: it may fall in these ticks): only
        when RunPod's log shows that tick read a log, and the save is all it planned."""
        before = len(self.host.runpod_requests())
        planned = dict(self._tick(TickPlan()).planned)
        read = any(
            r["method"] == "GET" and r["path"].endswith("/logs")
            for r in self.host.runpod_requests()[before:]
        )
        if read and set(planned) == {"SaveClusterRow"}:
            return {}
        return planned

    # --- one tick --------------------------------------------------------------------

    def _choose_plan(self, covering: bool = False) -> TickPlan:
        """A crash at the least covered point, a timed kill, or a clean tick. Past the
        run's chaos ticks (`covering`), every tick is armed at a point not yet fired: an
        armed tick fires only if it reaches its point (a steered action can miss, more
        often on a loaded machine), and the run goes on only to cover those points."""
        roll = self.rng.random()
        if covering or roll < 0.55:
            unfired = [p for p in POINTS if self.result.fired[p] == 0]
            pool = unfired if covering and unfired else list(POINTS)
            least = min(self.coverage[p] for p in pool)
            point = self.rng.choice([p for p in pool if self.coverage[p] == least])
            return TickPlan(crash_at=f"{point}:{self.rng.choice([1, 1, 1, 2])}")
        if roll < 0.85:
            return TickPlan(kill_after=self.rng.uniform(0.5, 2.5))
        return TickPlan()

    def _tick(
        self, plan: TickPlan, writer: Reconciler | None = None, contended: bool = False
    ) -> TickResult:
        """One tick; `contended` when another writer ran at the same time, so that being
        refused for the node's writer Lease is the expected outcome, not a failure."""
        writer = writer or self.reconciler
        began = self.host.kube_request_count()
        result = writer.tick(plan)
        self.result.ticks += 1
        self.result.hung += result.hung
        if result.died:
            self.died_spans.append((began, self.host.kube_request_count()))
            self.result.locks_expired += expire_lock(writer.db_path)
        problems = invariants.tick_violations(result, contended)
        self.result.violate(
            "ticks-run", [f"{p}; its log ends:\n{writer.log_tail()}" for p in problems]
        )
        return result

    def _tick_with_a_second_writer(self, plan: TickPlan) -> TickResult:
        self.result.second_writers += 1
        with ThreadPoolExecutor(2) as pool:
            second = pool.submit(self._tick, TickPlan(), self.second, True)
            result = self._tick(plan, contended=True)
            second.result()
        return result

    def _record(self, result: TickResult) -> None:
        point = result.plan.point
        if point is not None:
            self.result.armed[point] += 1
            if result.crashed:
                self.result.fired[point] += 1
                self.coverage[point] += 1
        self.result.kills += result.killed

    def _maybe_delete_database(self) -> None:
        lose_rows, self.workload.lose_rows = self.workload.lose_rows, False
        if lose_rows or (self.result.db_chaos and self.rng.random() < DB_DELETE_CHANCE):
            self.archived += read_journal(self.reconciler.db_path, self.result.db_deletions)
            self.reconciler.delete_database()
            self.result.db_deletions += 1

    def _look(self) -> Snapshot:
        snap = Snapshot.take(
            self.host,
            self.reconciler.owner,
            self.reconciler.node,
            self.workload.namespace,
            (self.neighbour.owner,),
        )
        for uid, pod in snap.pods.items():  # the Job controller's pods too, for the journal
            self.workload.uid_by_name.setdefault(pod["metadata"]["name"], uid)
        now = time.monotonic()
        self.history.observe(snap, now, now - self._last_look, datetime.now(UTC))
        self._last_look = now
        return snap

    def _witnesses(self, line: str) -> str:
        """What the writers' logs say of the instances a violation names: which process
        (log file, tick plan) made each, so that a rare interleaving can be read back."""
        ids = set(re.findall(r"\b[a-z0-9]{14}\b", line))
        found: list[str] = []
        for log_path in sorted(self.reconciler.workdir.glob(f"{self.reconciler.node}*.log")):
            tick = ""
            for text in log_path.read_text(errors="replace").splitlines():
                if text.startswith("--- tick"):
                    tick = text
                elif any(i in text for i in ids):
                    found.append(f"  {log_path.name}: {tick} | {text.strip()}")
        return "\n".join(found) or "  (no writer's log names them)"

    def _uncovered(self) -> bool:
        return any(self.result.fired[p] == 0 for p in POINTS)

    # --- invariants ------------------------------------------------------------------

    def _check(self) -> None:
        snap = self._look()
        result, history = self.result, self.history
        if result.settle_ticks is None:
            result.violate(
                "converged",
                [f"not converged after {MAX_SETTLE_TICKS} clean ticks: {snap.unconverged()[:6]}"],
            )
        requests = self.host.runpod_requests()
        result.violate(
            "foreign-untouched",
            invariants.foreign_violations(requests, self.foreign, snap)
            + invariants.foreign_volume_violations(requests, self.foreign_volumes, snap),
        )
        result.violate("request-log-whole", invariants.request_log_violations(requests))
        result.violate(
            "no-duplicate-volume",
            snap.duplicate_volumes() + invariants.volumes_made_twice(requests),
        )
        result.violate(
            "no-leaked-volume",
            snap.leaked_volumes() + invariants.volumes_left_billing(requests, snap),
        )
        result.volumes_made = sum(
            1
            for r in requests
            if (r["method"], r["path"], r["status"]) == ("POST", "/v2/network-volumes", 201)
        )
        theirs = volume_name(self.neighbour.owner, "")
        result.neighbour_volumes = sum(
            1
            for r in requests
            if (r["method"], r["path"], r["status"]) == ("POST", "/v2/network-volumes", 201)
            and str((r["body"] or {}).get("name", "")).startswith(theirs)
        )
        result.volume_requests = Counter(
            r["method"] for r in requests if r["path"].startswith("/v2/network-volumes")
        )
        result.violate(
            "no-duplicate-cluster",
            [f"gang {gang} ends with two clusters" for gang in snap.duplicate_clusters()]
            + invariants.clusters_made_twice(
                requests, invariants.list_times(requests), CREATE_GRACE
            ),
        )
        workload = self.workload
        result.gangs_succeeded = len(workload.gangs_succeeded)
        result.violate(
            "finished-gang-not-rerun",
            invariants.gangs_rerun(requests, workload.gangs_succeeded)
            + invariants.gang_ends_lost(workload.succeeded_pods, history.finished_as, snap),
        )
        result.violate(
            "no-leaked-cluster",
            [f"cluster {c} outlived its Job's pods" for c in snap.leaked_clusters()],
        )
        result.clusters_made = len(invariants.clusters_made(requests))
        result.violate("terminate-by-delete", invariants.action_requests(requests))
        journal = (
            self.archived
            + read_journal(self.reconciler.db_path, self.result.db_deletions)
            + read_journal(self.second.db_path, SECOND_WRITER_GENERATION)
            + self.neighbour_archived
            + read_journal(self.neighbour.db_path, NEIGHBOUR_GENERATION)
        )
        for index, chained in enumerate(self.chained):
            journal += read_journal(chained.db_path, CHAIN_GENERATION + index)
        result.violate(
            "journal",
            invariants.journal_violations(
                requests,
                invariants.outside(self.host.kube_requests(), self.died_spans),
                journal,
                self.workload.namespace,
                {**self.host.pod_uids(self.workload.namespace), **self.workload.uid_by_name},
            ),
        )
        made = invariants.instances_made(requests)
        lists = invariants.list_times(requests)
        ended, ended_on = {**history.seen_finished}, {}
        for uid, at in self.workload.ended.items():
            if uid not in ended or at < ended[uid]:
                ended[uid], ended_on[uid] = at, self.workload.ended_on[uid]
        reruns, reruns_explained = invariants.reruns(made, ended, lists, CREATE_GRACE, ended_on)
        result.violate("finished-not-rerun", reruns)
        result.reruns_explained = len(reruns_explained)
        unexplained, explained = invariants.duplicates(made, lists, CREATE_GRACE)
        result.violate(
            "no-unexplained-duplicate",
            [f"{line}\n{self._witnesses(line)}" for line in unexplained],
        )
        result.duplicates_seen = len(unexplained) + len(explained)
        result.duplicates_explained = len(explained)
        result.duplicates_healed = not snap.duplicates()
        result.orphan_seconds = history.orphan_seconds
        result.faults = self.workload.faults + Counter({"second-writer": result.second_writers})
        result.faults_biting = self.workload.bites


# --- a campaign -------------------------------------------------------------------------


@dataclass
class Campaign:
    runs: int
    seed: int
    chaos_ticks: int = 40
    db_chaos_every: int = 2
    """Every Nth run (1-based) deletes the database at random moments."""
    workdir: Path | None = None

    def execute(self, echo: bool = False) -> list[RunResult]:
        with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
            workdir = self.workdir or Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            coverage: Counter[str] = Counter()
            results = []
            with sim_host(workdir) as host:
                for index in range(self.runs):
                    db_chaos = (index + 1) % self.db_chaos_every == 0
                    run = Run(
                        host,
                        workdir,
                        index,
                        self.seed * 1000 + index,
                        db_chaos,
                        self.chaos_ticks,
                        coverage,
                    )
                    results.append(run.execute())
                    if echo:
                        print(run_line(results[-1]), flush=True)
            return results


def run_line(r: RunResult) -> str:
    held = "all invariants held" if not r.violations else f"{len(r.violations)} VIOLATIONS"
    return (
        f"run {r.index} seed {r.seed}{' db-chaos' if r.db_chaos else ''}: {r.ticks} ticks, "
        f"{sum(r.fired.values())} crashes, {r.kills} kills, {r.db_deletions} db deletions, "
        f"{sum(r.faults.values())} faults, converged in {r.settle_ticks} ticks, {held}"
    )


def table(results: list[RunResult]) -> str:
    lines = ["", "crash point            armed  fired  runs-fired"]
    for point in POINTS:
        armed = sum(r.armed[point] for r in results)
        fired = sum(r.fired[point] for r in results)
        runs = sum(1 for r in results if r.fired[point])
        lines.append(f"{point:<22} {armed:>5}  {fired:>5}  {runs:>5}/{len(results)}")
    kills = sum(r.kills for r in results)
    lines.append(f"{'random SIGKILL':<22} {'':>5}  {kills:>5}")
    lines.append(f"{'hung (a failure)':<22} {'':>5}  {sum(r.hung for r in results):>5}")
    lines.append(f"{'stale lock expired':<22} {'':>5}  {sum(r.locks_expired for r in results):>5}")
    lines.append(f"{'database deleted':<22} {'':>5}  {sum(r.db_deletions for r in results):>5}")
    faults: Counter[str] = sum((r.faults for r in results), Counter())
    lines += ["", f"{'fault injected':<32} count"]
    biting: Counter[str] = sum((r.faults_biting for r in results), Counter())
    lines += [
        f"{name:<32} {n:>5}" + (f"  ({biting[name]} met their state)" if name in BITES else "")
        for name, n in sorted(faults.items())
    ]
    lines += ["", f"{'invariant':<32} held in runs"]
    for name in INVARIANTS:
        held = sum(1 for r in results if all(v[0] != name for v in r.violations))
        lines.append(f"{name:<32} {held:>3}/{len(results)}")
    return "\n".join(lines + _summary_lines(results) + _violation_lines(results))


def _summary_lines(results: list[RunResult]) -> list[str]:
    settles = [r.settle_ticks for r in results if r.settle_ticks is not None]
    orphan = [r.orphan_seconds for r in results]
    return [
        "",
        f"ticks total: {sum(r.ticks for r in results)}",
        f"ticks to converge after faults stop: median {statistics.median(settles or [0]):g}, "
        f"max {max(settles or [0])}, not converged in {len(results) - len(settles)} runs",
        f"duplicates made (RunPod's request log): {sum(r.duplicates_seen for r in results)}, "
        f"of them explained (an in-doubt create the lagging list hid): "
        f"{sum(r.duplicates_explained for r in results)} (a re-run of ended work: "
        f"{sum(r.reruns_explained for r in results)}); healed in "
        f"{sum(r.duplicates_healed for r in results)}/{len(results)} runs",
        f"orphan instance-seconds: total {sum(orphan):.1f}, max per run {max(orphan):.1f}",
        f"Instant Clusters made: {sum(r.clusters_made for r in results)}; gangs whose rank 0 "
        f"exited 0: {sum(r.gangs_succeeded for r in results)}",
        f"network volumes made: {sum(r.volumes_made for r in results)}; requests to "
        f"/v2/network-volumes: {dict(sum((r.volume_requests for r in results), Counter()))}",
        f"second virtual node: {sum(r.neighbour_ticks for r in results)} ticks, "
        f"{sum(r.neighbour_crashes for r in results)} died after a volume's POST, "
        f"{sum(r.neighbour_volumes for r in results)} volumes made by it",
    ]


def _violation_lines(results: list[RunResult]) -> list[str]:
    lines = [f"run {r.index} [{name}] {message}" for r in results for name, message in r.violations]
    return ["", "violations:", *lines] if lines else ["", "violations: none"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--chaos-ticks", type=int, default=40)
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep databases and reconciler logs here"
    )
    args = parser.parse_args(argv)
    campaign = Campaign(args.runs, args.seed, args.chaos_ticks, workdir=args.workdir)
    results = campaign.execute(echo=True)
    print(table(results))
    return 1 if any(r.violations for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
