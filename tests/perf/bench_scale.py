"""Scale benchmark: what one tick costs at 100, 1 000 and 10 000 managed pods.

    python tests/perf/bench_scale.py [--pods N ...] [--json PATH] [--profile DIR]

Three scenarios, each against both simulators over loopback HTTP with the real clients:

- steady: N pods, each with its owned running instance, after ticks have adopted them and
  a tick plans nothing. Per tick: wall time; the reconciler's CPU time; the simulators'
  CPU time; the planner's own time (in the tick, and `plan_tick()` re-run on the same
  observation); Kubernetes and RunPod requests; database write statements; peak RSS.
- burst: N new pods at once under RunPod's 60-per-minute quota, ticking every 15 s:
  simulated time until every pod has an instance, 429s, share of the quota spent on
  creates.
- churn: 10% of the pods deleted and as many new ones added before each tick (quota
  raised and `max_creates_per_tick` = N, so that the reconciler's own cost shows, not
  the quota): time and requests per tick.

How it separates the reconciler's cost from the simulators': every (scenario, N) runs
in a fresh worker process holding only the reconciler; the simulators run in a child
process of it (see `scale_world`). So `time.process_time()` in the worker is the
reconciler's CPU, `ru_maxrss` of the worker is the reconciler's peak RSS (its whole
life: imports, warm-up tick, measured ticks), and tracemalloc's peak during one extra
tick is the Python heap a tick allocates. The simulators' CPU is read in their own
process. Database writes are counted by SQLAlchemy events on the store's engine: the
write transactions committed (the "database writes" the targets count: each is one commit of
SQLite's write-ahead log) and, beside them, the rows those transactions wrote.

Each target is printed as met or MISSED after the figures; the exit code is 1 when any
was missed.

`--profile DIR` writes a cProfile of one steady tick and of one extra churn round at the
largest N, timed by CPU (`time.process_time`), not wall time; with BENCH_PSTATS=FILE
in the environment, the raw profile goes to FILE too (for `pstats`: callers, callees).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import unquote

import perf_record
from scale_world import (
    DEFAULT_QUOTA,
    RAISED_QUOTA,
    MeasuredReconciler,
    RequestLog,
    bench_settings,
    converge,
    current_rss_mb,
    peak_rss_mb,
    remote_world,
)

import reconciler.runtime.tick.engine as engine_module
from reconciler.core.config import Settings
from reconciler.core.planner import Observation, PlanError, plan_tick
from reconciler.sim.clock import SimClock

PAGE_SIZE = 500
LIST_PAGE = "pod list page"
UNSCHEDULED_PAGE = "unscheduled pod list page"
HEARTBEAT = "heartbeat"
TICK_INTERVAL = 15.0
DEFAULT_PODS = (100, 1000, 10_000)
DEFAULT_BURST_MAX = 1000
STEADY_TICKS = 3
MIN_BURST_MINUTES = 5
CHURN_ROUNDS = 4
CHURN_SHARE = 0.10
SCENARIOS = ("steady", "mixed", "burst", "churn")

World = Callable[[tuple[int, int, int]], AbstractContextManager[tuple[Any, SimClock]]]


# --- one measured tick ---------------------------------------------------------------


@dataclass
class TickSample:
    wall_s: float
    cpu_s: float
    """Process CPU of the measuring process: the reconciler's when the host is remote."""
    sim_cpu_s: float
    planner_s: float
    kube: dict[str, int]
    runpod: dict[str, int]
    runpod_statuses: dict[str, int]
    writes: dict[str, int]
    """Rows written, by "VERB table"."""
    transactions: int
    """Write transactions committed: what the targets call database writes."""
    planned: dict[str, int]

    @property
    def kube_total(self) -> int:
        return sum(self.kube.values())

    @property
    def runpod_total(self) -> int:
        return sum(self.runpod.values())

    @property
    def rows_total(self) -> int:
        return sum(self.writes.values())


class PlannerProbe:
    """Wraps the engine's `plan_tick` to time it in the tick and keep its last input."""

    def __init__(self, keep: bool = False) -> None:
        self.elapsed = 0.0
        self.keep = keep
        self.last: tuple[Observation, Settings, datetime] | None = None

    def __call__(
        self, obs: Observation, settings: Settings, now: datetime, on_error: PlanError | None = None
    ) -> list[Any]:
        started = time.perf_counter()
        try:
            return (
                plan_tick(obs, settings, now)
                if on_error is None
                else plan_tick(obs, settings, now, on_error)
            )
        finally:
            self.elapsed = time.perf_counter() - started
            if self.keep:  # off while measuring: a kept observation would inflate the RSS
                self.last = (obs, settings, now)

    @contextmanager
    def installed(self) -> Iterator[PlannerProbe]:
        with mock.patch.object(engine_module, "plan_tick", self):
            yield self


def kube_kind(method: str, path: str, query: str = "") -> str:
    """`GET /api/v1/pods` → "pod list page", or "unscheduled pod list page" for offload
    mode's list of Pending pods without a node; lease and node calls → "heartbeat"."""
    parts = path.split("?")[0].strip("/").split("/")
    if "leases" in parts or "nodes" in parts:
        return HEARTBEAT
    if method == "GET" and parts[-1] == "pods" and "namespaces" not in parts:
        return UNSCHEDULED_PAGE if "spec.nodeName=," in unquote(query) else LIST_PAGE
    if "namespaces" in parts and len(parts) > parts.index("namespaces") + 2:
        rest = parts[parts.index("namespaces") + 2 :]
        return f"{method} {rest[0]}" + (f"/{rest[2]}" if len(rest) > 2 else "")
    return f"{method} {'/'.join(parts)}"


def runpod_route(method: str, path: str) -> str:
    parts = path.strip("/").split("/")
    if len(parts) >= 3 and parts[1] == "pods":
        parts[2] = "{id}"
    return f"{method} /{'/'.join(parts)}"


def summarize(log: RequestLog) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    kube = Counter(kube_kind(method, path, query) for method, path, query, _s in log.kube)
    runpod = Counter(runpod_route(method, path) for method, path, _q, _s in log.runpod)
    statuses = Counter(str(status) for *_rest, status in log.runpod)
    return dict(kube), dict(runpod), dict(statuses)


def measure_tick(rec: MeasuredReconciler, host: Any) -> TickSample:
    probe = PlannerProbe()
    rec.writes.take()
    host.mark()
    sim_cpu = host.cpu_seconds()
    wall, cpu = time.perf_counter(), time.process_time()
    with probe.installed():
        report = rec.tick()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    sim_cpu = host.cpu_seconds() - sim_cpu
    kube, runpod, statuses = summarize(host.requests_since_mark())
    writes = rec.writes.take()
    return TickSample(
        wall,
        cpu,
        sim_cpu,
        probe.elapsed,
        kube,
        runpod,
        statuses,
        dict(writes.rows),
        writes.transactions,
        dict(report.planned),
    )


# --- steady state ---------------------------------------------------------------------


@dataclass
class SteadyResult:
    n: int
    seed_ticks: int
    samples: list[TickSample]
    plan_direct_s: float
    """Best of five `plan_tick()` calls on a steady tick's observation (wall time)."""
    plan_direct_cpu_s: float
    """The same calls' best thread CPU time: robust when other processes share the CPU."""
    baseline_rss_mb: float
    """RSS once the reconciler is built, before its first tick (imports, clients, store)."""
    peak_rss_mb: float
    tick_heap_peak_mb: float
    """tracemalloc's peak during one more tick (Python objects the tick allocates)."""
    calls: int
    """Python function calls (cProfile) in a tick, the median of three more: unlike CPU
    time, the same on a busy machine as on a quiet one."""
    objects: int = 0
    """Pods and claims on the node (`n` pods in the steady scenario)."""
    profile: str = ""

    @property
    def last(self) -> TickSample:
        return self.samples[-1]

    def median(self, attribute: str) -> float:
        return float(statistics.median(getattr(s, attribute) for s in self.samples))

    def summary(self) -> dict[str, Any]:
        kube = self.last.kube
        return {
            "wall_ms": 1000 * self.median("wall_s"),
            "cpu_ms": 1000 * self.median("cpu_s"),
            "sim_cpu_ms": 1000 * self.median("sim_cpu_s"),
            "planner_in_tick_ms": 1000 * self.median("planner_s"),
            "plan_direct_ms": 1000 * self.plan_direct_s,
            "plan_direct_cpu_ms": 1000 * self.plan_direct_cpu_s,
            "baseline_rss_mb": self.baseline_rss_mb,
            "peak_rss_mb": self.peak_rss_mb,
            "tick_heap_peak_mb": self.tick_heap_peak_mb,
            "objects": self.objects or self.n,
            "calls_per_object": self.calls / (self.objects or self.n),
            "kube_pages": kube.get(LIST_PAGE, 0),
            "kube_heartbeat": kube.get(HEARTBEAT, 0),
            "kube_unscheduled": kube.get(UNSCHEDULED_PAGE, 0),
            "kube_other": {
                k: v for k, v in kube.items() if k not in (LIST_PAGE, HEARTBEAT, UNSCHEDULED_PAGE)
            },
            "expected_pages": math.ceil(self.n / PAGE_SIZE),
            "runpod": self.last.runpod,
            "writes": self.last.writes,
            "transactions": self.last.transactions,
        }


def seed_steady(
    host: Any, clock: SimClock, n: int, settings: Settings, database_url: str
) -> tuple[list[tuple[str, str]], int]:
    """N pods with their owned instances, adopted until a tick plans nothing."""
    pods: list[tuple[str, str]] = host.add_pods("steady", n, settings.node.name)
    host.add_instances(settings.owner_id, pods)
    return pods, converge(host, clock, database_url, settings, TICK_INTERVAL)


MIXED_CPU_PODS, MIXED_GANGS, MIXED_CLAIMS = 100, 100, 1000


def seed_mixed(
    host: Any, clock: SimClock, n: int, settings: Settings, database_url: str
) -> tuple[list[tuple[str, str]], int]:
    """The steady scenario's N GPU pods, with what the reconciler itself makes for more:
    CPU pods' CPU instances, two-pod gangs' Instant Clusters and claims' volumes."""
    pods: list[tuple[str, str]] = host.add_pods("steady", n, settings.node.name)
    host.add_instances(settings.owner_id, pods)
    host.add_cpu_pods("cpu", MIXED_CPU_PODS, settings.node.name)
    host.add_gangs("gang", MIXED_GANGS, settings.node.name)
    host.add_claims("claim", MIXED_CLAIMS)
    return pods, converge(host, clock, database_url, settings, TICK_INTERVAL)


def mixed_objects(n: int) -> int:
    return n + MIXED_CPU_PODS + 2 * MIXED_GANGS + MIXED_CLAIMS


def warm_reconciler(
    host: Any, clock: SimClock, settings: Settings, database_url: str
) -> MeasuredReconciler:
    """A fresh reconciler after one tick: the node is registered, the pools are warm."""
    rec = MeasuredReconciler(host.urls(), database_url, settings, clock)
    rec.tick()
    clock.advance(TICK_INTERVAL)
    return rec


def best_plan_time(
    obs: tuple[Observation, Settings, datetime], repeats: int = 5
) -> tuple[float, float]:
    """Best wall and best thread-CPU time of `plan_tick()` on one observation."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.thread_time()
        plan_tick(*obs)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.thread_time() - cpu)
    return min(walls), min(cpus)


def steady_observation(rec: MeasuredReconciler) -> tuple[Observation, Settings, datetime]:
    probe = PlannerProbe(keep=True)
    with probe.installed():
        rec.tick()
    assert probe.last is not None
    return probe.last


def traced_tick_peak_mb(rec: MeasuredReconciler) -> float:
    tracemalloc.start()
    try:
        rec.tick()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def counted_tick_calls(rec: MeasuredReconciler, clock: SimClock, ticks: int = 3) -> int:
    """Function calls of a tick in this thread (the simulators run elsewhere): the median
    of a few, since the work on its own cadence (the hourly billing reads, say) lands on
    one tick now and then."""
    counts = []
    for _ in range(ticks):
        profiler = cProfile.Profile()
        profiler.runcall(rec.tick)
        counts.append(int(pstats.Stats(profiler).total_calls))  # type: ignore[attr-defined]
        clock.advance(TICK_INTERVAL)
    return int(statistics.median(counts))


def profiled_tick(rec: MeasuredReconciler, top: int = 30) -> str:
    profiler = cProfile.Profile(time.process_time)
    profiler.runcall(rec.tick)
    if os.environ.get("BENCH_PSTATS"):
        profiler.dump_stats(os.environ["BENCH_PSTATS"])
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def bench_steady(
    host: Any,
    clock: SimClock,
    n: int,
    workdir: str,
    ticks: int = STEADY_TICKS,
    profile: bool = False,
    mixed: bool = False,
) -> SteadyResult:
    """With `mixed`, the steady tick of `seed_mixed`'s node."""
    settings = bench_settings(n)
    database_url = f"sqlite:///{workdir}/steady-{n}.db"
    seed = seed_mixed if mixed else seed_steady
    _pods, seed_ticks = seed(host, clock, n, settings, database_url)
    baseline = current_rss_mb()
    rec = warm_reconciler(host, clock, settings, database_url)
    samples = []
    for _ in range(ticks):
        samples.append(measure_tick(rec, host))
        clock.advance(TICK_INTERVAL)
    rss = peak_rss_mb()
    plan_wall, plan_cpu = best_plan_time(steady_observation(rec))
    heap = traced_tick_peak_mb(rec)
    clock.advance(TICK_INTERVAL)
    calls = counted_tick_calls(rec, clock)
    objects = mixed_objects(n) if mixed else n
    result = SteadyResult(
        n, seed_ticks, samples, plan_wall, plan_cpu, baseline, rss, heap, calls, objects
    )
    if profile:
        result.profile = profiled_tick(rec)
    rec.close()
    return result


# --- burst ----------------------------------------------------------------------------


@dataclass
class BurstResult:
    n: int
    ticks: int
    sim_seconds: float
    wall_s: float
    cpu_s: float
    runpod: dict[str, int]
    runpod_statuses: dict[str, int]
    quota_per_minute: int
    minute_windows: int
    peak_rss_mb: float

    @property
    def creates(self) -> int:
        return self.runpod.get("POST /v2/pods", 0)

    def summary(self) -> dict[str, Any]:
        minutes = self.sim_seconds / 60
        return {
            "sim_minutes": minutes,
            "ticks": self.ticks,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "throttled": self.runpod_statuses.get("429", 0),
            "creates": self.creates,
            "requests": sum(self.runpod.values()),
            # creates / (quota per minute x minutes the burst took)
            "quota_rate_share": self.creates / (self.quota_per_minute * minutes),
            # creates / quota of every minute window touched, the two edge windows whole
            "window_share": self.creates / (self.quota_per_minute * self.minute_windows),
            "request_share": self.creates / max(1, sum(self.runpod.values())),
        }


def bench_burst(
    host: Any, clock: SimClock, n: int, workdir: str, max_ticks: int = 100_000
) -> BurstResult:
    settings = bench_settings(n)
    rec = warm_reconciler(host, clock, settings, f"sqlite:///{workdir}/burst-{n}.db")
    uids = [uid for _name, uid in host.add_pods("burst", n, settings.node.name)]
    host.mark()
    start, wall, cpu = clock.now(), time.perf_counter(), time.process_time()
    ticks = 0
    while host.pods_with_instance(settings.owner_id, uids) < n:
        if ticks >= max_ticks:
            raise RuntimeError(f"burst of {n} unfinished after {ticks} ticks")
        ticks += 1
        began = clock.now()
        rec.tick()
        end = clock.now()
        clock.advance(max(0.0, TICK_INTERVAL - (end - began).total_seconds()))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    _kube, runpod, statuses = summarize(host.requests_since_mark())
    windows = math.floor(end.timestamp() / 60) - math.floor(start.timestamp() / 60) + 1
    rec.close()
    return BurstResult(
        n,
        ticks,
        (end - start).total_seconds(),
        wall,
        cpu,
        runpod,
        statuses,
        DEFAULT_QUOTA[0],
        windows,
        peak_rss_mb(),
    )


# --- churn ----------------------------------------------------------------------------


@dataclass
class ChurnResult:
    n: int
    replaced_per_tick: int
    samples: list[TickSample] = field(default_factory=list)
    profile: str = ""

    def summary(self) -> dict[str, Any]:
        """Means over the rounds after the first, once deletes and creates overlap."""
        rounds = self.samples[1:] or self.samples

        def mean(value: Callable[[TickSample], float]) -> float:
            return statistics.fmean(value(sample) for sample in rounds)

        per_pod = self.replaced_per_tick
        return {
            "replaced_per_tick": self.replaced_per_tick,
            "per_replaced_pod": {
                "kube_requests": mean(lambda t: t.kube_total) / per_pod,
                # Without the steady tick's own list pages and heartbeat, which do not
                # grow with the number of pods replaced.
                "kube_requests_beyond_steady": mean(
                    lambda t: (
                        t.kube_total
                        - t.kube.get(LIST_PAGE, 0)
                        - t.kube.get(UNSCHEDULED_PAGE, 0)
                        - t.kube.get(HEARTBEAT, 0)
                    )
                )
                / per_pod,
                "runpod_requests": mean(lambda t: t.runpod_total) / per_pod,
                "writes": mean(lambda t: t.transactions) / per_pod,
                "rows_written": mean(lambda t: t.rows_total) / per_pod,
                "cpu_ms": 1000 * mean(lambda t: t.cpu_s) / per_pod,
            },
            "wall_ms": 1000 * mean(lambda t: t.wall_s),
            "cpu_ms": 1000 * mean(lambda t: t.cpu_s),
            "sim_cpu_ms": 1000 * mean(lambda t: t.sim_cpu_s),
            "planner_ms": 1000 * mean(lambda t: t.planner_s),
            "kube_requests": mean(lambda t: t.kube_total),
            "runpod_requests": mean(lambda t: t.runpod_total),
            "writes": mean(lambda t: t.transactions),
            "rows_written": mean(lambda t: t.rows_total),
            "last_round": asdict(self.samples[-1]),
        }


def bench_churn(
    host: Any,
    clock: SimClock,
    n: int,
    workdir: str,
    rounds: int = CHURN_ROUNDS,
    profile: bool = False,
) -> ChurnResult:
    # The tick deadline at its maximum too: at N=10 000 a tick sends 2 000 RunPod
    # requests, and the client's pacing (simulated sleeps) would pass the default 10 s,
    # cutting creates short (in doubt, adopted a tick later) and measuring that instead.
    settings = bench_settings(n, max_creates_per_tick=max(50, n), tick_deadline=3600)
    database_url = f"sqlite:///{workdir}/churn-{n}.db"
    live, _ = seed_steady(host, clock, n, settings, database_url)
    rec = warm_reconciler(host, clock, settings, database_url)
    result = ChurnResult(n, max(1, round(n * CHURN_SHARE)))

    def replace_pods(number: int) -> None:
        nonlocal live
        victims, live = live[: result.replaced_per_tick], live[result.replaced_per_tick :]
        host.delete_pods([name for name, _uid in victims])
        live += host.add_pods(f"churn{number}", result.replaced_per_tick, settings.node.name)

    for number in range(rounds):
        replace_pods(number)
        result.samples.append(measure_tick(rec, host))
        clock.advance(TICK_INTERVAL)
    if profile:  # one round more: the profiler's own cost stays out of the samples
        replace_pods(rounds)
        result.profile = profiled_tick(rec)
    rec.close()
    return result


# --- running a scenario in a fresh worker process -------------------------------------


def run_scenario(world: World, scenario: str, n: int, profile: bool = False) -> Any:
    # The mixed node's seeding makes a thousand volumes: the quota is not what it measures.
    quota = RAISED_QUOTA if scenario in ("churn", "mixed") else DEFAULT_QUOTA
    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-") as workdir,
        world(quota) as (host, clock),
    ):
        if scenario in ("steady", "mixed"):
            return bench_steady(host, clock, n, workdir, profile=profile, mixed=scenario == "mixed")
        if scenario == "burst":
            return bench_burst(host, clock, n, workdir)
        return bench_churn(host, clock, n, workdir, profile=profile)


def worker_main(scenario: str, n: int, profile: bool) -> int:
    result = run_scenario(remote_world, scenario, n, profile)
    print(
        json.dumps(
            {"scenario": scenario, "n": n, "summary": result.summary(), "result": asdict(result)}
        )
    )
    return 0


def run_worker(scenario: str, n: int, profile_dir: Path | None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", scenario, "--pods", str(n)]
    if profile_dir is not None:
        command.append("--profile-tick")
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{scenario} at N={n} failed:\n{done.stderr[-3000:]}")
    record: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    record["worker_wall_s"] = time.perf_counter() - started
    profile = record["result"].pop("profile", "")
    if profile and profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        (profile_dir / f"{scenario}-{n}.txt").write_text(profile)
    return record


# --- report ---------------------------------------------------------------------------


def steady_rows(r: dict[str, Any], name: str = "steady") -> dict[str, str]:
    return {
        f"{name}: tick wall ms": f"{r['wall_ms']:.0f}",
        f"{name}: reconciler CPU ms": f"{r['cpu_ms']:.0f}",
        f"{name}: simulators CPU ms": f"{r['sim_cpu_ms']:.0f}",
        f"{name}: planner in tick ms": f"{r['planner_in_tick_ms']:.0f}",
        f"{name}: plan_tick() best wall/CPU ms": (
            f"{r['plan_direct_ms']:.0f} / {r['plan_direct_cpu_ms']:.0f}"
        ),
        f"{name}: RSS baseline/peak MB": f"{r['baseline_rss_mb']:.0f} / {r['peak_rss_mb']:.0f}",
        f"{name}: tick heap peak MB": f"{r['tick_heap_peak_mb']:.1f}",
        f"{name}: objects (pods + claims)": str(r["objects"]),
        f"{name}: Python calls / object (cProfile)": f"{r['calls_per_object']:.0f}",
        f"{name}: kube pages+unscheduled+heartbeat+other": (
            f"{r['kube_pages']}+{r['kube_unscheduled']}+{r['kube_heartbeat']}"
            f"+{sum(r['kube_other'].values())}"
        ),
        f"{name}: RunPod requests": str(sum(r["runpod"].values())),
        f"{name}: DB write transactions (rows)": f"{r['transactions']} ("
        + (", ".join(f"{k} x{v}" for k, v in r["writes"].items()) or "none")
        + ")",
    }


def burst_rows(r: dict[str, Any]) -> dict[str, str]:
    return {
        "burst: simulated minutes": f"{r['sim_minutes']:.1f}",
        "burst: ticks / wall s": f"{r['ticks']} / {r['wall_s']:.0f}",
        "burst: 429s": str(r["throttled"]),
        "burst: creates/requests": f"{r['creates']}/{r['requests']} = {r['request_share']:.1%}",
        "burst: create rate / quota rate": f"{r['quota_rate_share']:.1%}",
        "burst: creates / windows' quota": f"{r['window_share']:.1%}",
    }


def churn_rows(r: dict[str, Any]) -> dict[str, str]:
    return {
        "churn: pods replaced per tick": str(r["replaced_per_tick"]),
        "churn: wall ms / tick": f"{r['wall_ms']:.0f}",
        "churn: reconciler CPU ms / tick": f"{r['cpu_ms']:.0f}",
        "churn: simulators CPU ms / tick": f"{r['sim_cpu_ms']:.0f}",
        "churn: kube requests / tick": f"{r['kube_requests']:.0f}",
        "churn: RunPod requests / tick": f"{r['runpod_requests']:.0f}",
        "churn: DB write transactions / rows per tick": (
            f"{r['writes']:.0f} / {r['rows_written']:.0f}"
        ),
        "churn per replaced pod: kube/RunPod/writes/CPU ms": (
            f"{r['per_replaced_pod']['kube_requests_beyond_steady']:.2f} / "
            f"{r['per_replaced_pod']['runpod_requests']:.2f} / "
            f"{r['per_replaced_pod']['writes']:.2f} / {r['per_replaced_pod']['cpu_ms']:.1f}"
        ),
        "churn per replaced pod: rows written": f"{r['per_replaced_pod']['rows_written']:.1f}",
    }


def mixed_rows(r: dict[str, Any]) -> dict[str, str]:
    return steady_rows(r, "mixed")


ROWS = {"steady": steady_rows, "mixed": mixed_rows, "burst": burst_rows, "churn": churn_rows}


def table(records: Sequence[dict[str, Any]], sizes: Sequence[int]) -> str:
    cells: dict[str, dict[int, str]] = {}
    for record in records:
        for label, value in ROWS[record["scenario"]](record["summary"]).items():
            cells.setdefault(label, {})[record["n"]] = value
    width = max(len(label) for label in cells) + 2
    column = max([24, *(len(value) + 2 for by_n in cells.values() for value in by_n.values())])
    lines = ["".ljust(width) + "".join(f"{'N=' + str(n):<{column}}" for n in sizes)]
    for label, by_n in cells.items():
        lines.append(label.ljust(width) + "".join(f"{by_n.get(n, '-'):<{column}}" for n in sizes))
    return "\n".join(lines)


@dataclass(frozen=True)
class Target:
    name: str
    measured: str
    met: bool
    resource: bool = False
    """CPU time or memory: told only at the benchmark's N in its own quiet process, not
    by the smoke test's small N inside the test run (which checks every other target)."""


def steady_targets(n: int, r: dict[str, Any]) -> list[Target]:
    runpod, pages = sum(r["runpod"].values()), r["kube_pages"]
    return [
        Target(f"N={n} steady: exactly 1 RunPod request", str(runpod), runpod == 1),
        # Offload mode lists the unscheduled pods on every tick: one page, which does
        # not grow with N.
        Target(
            f"N={n} steady: {r['expected_pages']} list pages + 1 unscheduled-pods page "
            "+ heartbeat, nothing else",
            f"{pages} pages, {r['kube_unscheduled']} unscheduled, "
            f"{r['kube_heartbeat']} heartbeat, other {r['kube_other']}",
            pages == r["expected_pages"] and r["kube_unscheduled"] == 1 and not r["kube_other"],
        ),
        Target(
            f"N={n} steady: no DB write but the tick row",
            f"{r['transactions']} transaction(s): {json.dumps(r['writes'])}",
            r["transactions"] == 1 and r["writes"] == {"INSERT ticks": 1},
        ),
        Target(
            f"N={n} steady: tick CPU <= 1 s", f"{r['cpu_ms']:.0f} ms", r["cpu_ms"] <= 1000, True
        ),
        Target(
            f"N={n} steady: planner <= 150 ms (CPU, best of 5)",
            f"{r['plan_direct_cpu_ms']:.0f} ms",
            r["plan_direct_cpu_ms"] <= 150,
            True,
        ),
        Target(
            f"N={n} steady: peak RSS <= 250 MB",
            f"{r['peak_rss_mb']:.0f} MB",
            r["peak_rss_mb"] <= 250,
            True,
        ),
        *calls_target(f"N={n} steady", r),
    ]


CALLS_PER_POD = 165
"""The steady tick's Python calls per pod before clusters, volumes and CPU pods came in."""
CALLS_FROM_N = 1000
"""Below it the tick's fixed calls (clients, store, heartbeat) outweigh the per-pod ones."""


def calls_target(name: str, r: dict[str, Any]) -> list[Target]:
    if r["objects"] < CALLS_FROM_N:
        return []
    return [
        Target(
            f"{name}: <= {CALLS_PER_POD} Python calls per pod or claim (cProfile)",
            f"{r['calls_per_object']:.0f}",
            r["calls_per_object"] <= CALLS_PER_POD,
        )
    ]


def mixed_targets(n: int, r: dict[str, Any]) -> list[Target]:
    """The steady budget per object, with CPU pods, gangs and claims on the node."""
    name, runpod = f"N={n} mixed ({r['objects']} pods and claims)", sum(r["runpod"].values())
    writes = {k: v for k, v in r["kube_other"].items() if not k.startswith("GET")}
    return [
        Target(f"{name}: exactly 1 RunPod request", json.dumps(r["runpod"]), runpod == 1),
        Target(
            f"{name}: Kubernetes reads and the heartbeat only",
            json.dumps(r["kube_other"]),
            not writes,
        ),
        Target(
            f"{name}: no DB write but the tick row",
            f"{r['transactions']} transaction(s): {json.dumps(r['writes'])}",
            r["transactions"] == 1 and r["writes"] == {"INSERT ticks": 1},
        ),
        Target(
            f"{name}: tick CPU <= 0.1 ms per pod or claim",
            f"{r['cpu_ms'] / r['objects'] * 1000:.0f} us",
            r["cpu_ms"] / r["objects"] <= 0.1,
            True,
        ),
        *calls_target(name, r),
    ]


def burst_targets(n: int, r: dict[str, Any]) -> list[Target]:
    found = [Target(f"N={n} burst: zero 429s", str(r["throttled"]), r["throttled"] == 0)]
    # A burst of a few windows is dominated by the first window's full quota.
    if r["sim_minutes"] >= MIN_BURST_MINUTES:
        found.append(
            Target(
                f"N={n} burst: >= 90% of the quota on creates (rate)",
                f"{r['quota_rate_share']:.1%}",
                r["quota_rate_share"] >= 0.9,
            )
        )
    return found


def churn_targets(n: int, r: dict[str, Any]) -> list[Target]:
    """Per replaced pod (stated for N=10 000, checked at every N). No CPU target: RunPod's
    quota caps replacements near 30 a minute, so the quota, not CPU, limits churn."""
    per = r["per_replaced_pod"]
    return [
        Target(
            f"N={n} churn: <= 5 Kubernetes requests per replaced pod (beyond the "
            "steady tick's pages and heartbeat)",
            f"{per['kube_requests_beyond_steady']:.2f} ({per['kube_requests']:.2f} with them)",
            per["kube_requests_beyond_steady"] <= 5,
        ),
        Target(
            f"N={n} churn: <= 4 database writes (write transactions) per replaced pod",
            f"{per['writes']:.2f} ({per['rows_written']:.1f} rows)",
            per["writes"] <= 4,
        ),
    ]


def targets(records: Sequence[dict[str, Any]]) -> list[Target]:
    checks: dict[str, Callable[[int, dict[str, Any]], list[Target]]] = {
        "steady": steady_targets,
        "mixed": mixed_targets,
        "burst": burst_targets,
        "churn": churn_targets,
    }
    found: list[Target] = []
    for record in records:
        if record["scenario"] in checks:
            found += checks[record["scenario"]](record["n"], record["summary"])
    return found


# --- command line ---------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--pods",
        type=int,
        nargs="+",
        default=list(DEFAULT_PODS),
        help="managed pod counts to measure",
    )
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument("--scenario", choices=SCENARIOS, nargs="+", default=list(SCENARIOS))
    parser.add_argument(
        "--burst-max",
        type=int,
        default=DEFAULT_BURST_MAX,
        help="skip the burst above this N (10 000 at 60/min is ~3 h simulated)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="cProfile (CPU time) one steady tick and one churn round at the largest N into DIR",
    )
    parser.add_argument("--worker", choices=SCENARIOS, help=argparse.SUPPRESS)
    parser.add_argument("--profile-tick", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def plan_runs(args: argparse.Namespace) -> list[tuple[str, int]]:
    return [
        (scenario, n)
        for n in sorted(args.pods)
        for scenario in args.scenario
        if not (scenario == "burst" and n > args.burst_max)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker, args.pods[0], args.profile_tick)
    run_record = perf_record.Run("scale", argv)
    records = []
    largest = max(args.pods)
    for scenario, n in plan_runs(args):
        print(f"running {scenario} at N={n} ...", file=sys.stderr, flush=True)
        profile_dir = args.profile if scenario != "burst" and n == largest else None
        records.append(run_worker(scenario, n, profile_dir))
    print(table(records, sorted(args.pods)))
    print()
    checked = targets(records)
    for target in checked:
        print(f"[{'met' if target.met else 'MISSED'}] {target.name}: {target.measured}")
    if args.json:
        found = [asdict(t) for t in checked]
        for record in records:  # the whole result is the worker's; the page reads the summary
            record.pop("result", None)
        run_record.write(args.json, {"runs": records, "targets": found})
    return 0 if all(t.met for t in checked) else 1


if __name__ == "__main__":
    sys.exit(main())
