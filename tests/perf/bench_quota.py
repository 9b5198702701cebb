"""Quota benchmark: how `reconciler sync` spends RunPod's quota.

    python tests/perf/bench_quota.py [--scenario trickle burst clusters] [--json PATH]

Every scenario runs real `reconciler sync` processes (the loop mode, watch on, default
interval) against the simulators on 127.0.0.1, whose clock follows real time, and reads
what RunPod was asked from the simulator's request log:

- trickle: one pod every 2 s for two minutes, the default quota (60 a minute, 3 000 an
  hour, 50 000 a day; `--trickle-quota` for another, `--trickle-start` to start the
  simulated clock later in a day) and the default catalog, whose cheapest type runs out
  after 24 pods. Requests by kind, the lists' share, refused creates, 429s, and the time
  from a pod's creation to its instance's (p50, p95). About 2.5 minutes.
- burst: `--burst-pods` pods (1 000) at once in the loop mode, ample GPU stock. Creates
  as a share of what the quota windows allowed from the burst's start to its last
  create (every minute window touched, the two at the edges whole), and 429s. The
  quota is the contract's times `--burst-quota-scale` (1): about 18 minutes. (At 5
  times, on a 2-vCPU machine shared with other work, the reconciler's ticks, not the
  quota, set the pace.)
- clusters: three reconcilers, three clusters, one RunPod key: `--cluster-pods` pods
  (100) each at once, the contract's quota times `--clusters-quota-scale` (1). 429s,
  and each cluster's share of the creates in the first minute and while all three
  still had pods waiting.

Targets are printed after the figures as met or MISSED; the exit code is 1
when any was missed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import perf_record
from quota_world import Cluster, QuotaWorld, quota_world
from scale_world import ample_capacity

DEFAULT_QUOTA = (60, 3000, 50000)
TRICKLE_PODS = 60
TRICKLE_SPACING = 2.0
BURST_PODS = 1000
CLUSTER_PODS = 100
SCALE = 1
# The most any scenario may wait for its pods after the last one was added (a burst of
# 1 000 at the contract's 60 a minute takes about 18 minutes).
DRAIN_LIMIT_SECONDS = 1800.0
# The creates' share of the windows is judged on a burst that spans this many minutes.
MIN_BURST_WINDOWS = 5
# The reconcilers' start-up is over once they sent RunPod nothing for this long.
STARTUP_QUIET_SECONDS = 2.0


def route(method: str, path: str) -> str:
    parts = path.strip("/").split("/")
    if len(parts) >= 3 and parts[1] == "pods":
        parts[2] = "{id}"
    return f"{method} /{'/'.join(parts)}"


@dataclass
class RunPodLog:
    """The RunPod requests of a scenario, by route and answer."""

    requests: list[tuple[str, int, str]] = field(default_factory=list)
    """(route, status, owner id of a create's body or "")"""

    @classmethod
    def since(cls, world: QuotaWorld, mark: int) -> RunPodLog:
        log = cls()
        for request in world.runpod.requests[mark:]:
            body = request.body if isinstance(request.body, dict) else {}
            owner = str((body.get("env") or {}).get("RUNPOD_RECONCILER_OWNER", ""))
            log.requests.append((route(request.method, request.path), request.status, owner))
        return log

    def by_kind(self) -> dict[str, int]:
        return dict(Counter(f"{r} {s}" for r, s, _o in self.requests))

    def count(self, wanted: str, status: int | None = None) -> int:
        return sum(1 for r, s, _o in self.requests if r == wanted and status in (None, s))

    @property
    def total(self) -> int:
        return len(self.requests)

    @property
    def throttled(self) -> int:
        return sum(1 for _r, s, _o in self.requests if s == 429)


def wait_for_first_ticks(world: QuotaWorld) -> None:
    """Until every reconciler has listed RunPod once and then sent nothing for a while:
    its start-up is not measured (the start-up tick, and the one its watches ask for when
    they start, since changes may have come before they watched)."""
    started = time.monotonic()
    while sum(1 for r in world.runpod.requests if (r.method, r.path) == ("GET", "/v2/pods")) < len(
        world.clusters
    ):
        if time.monotonic() - started > 60:
            raise RuntimeError("the reconcilers did not tick within 60 s")
        time.sleep(0.2)
    seen, quiet_since = len(world.runpod.requests), time.monotonic()
    while time.monotonic() - quiet_since < STARTUP_QUIET_SECONDS:
        if time.monotonic() - started > 60:
            raise RuntimeError("the reconcilers did not settle within 60 s")
        time.sleep(0.2)
        if len(world.runpod.requests) != seen:
            seen, quiet_since = len(world.runpod.requests), time.monotonic()


def wait_for_instances(
    world: QuotaWorld, limit: float, on_poll: Callable[[], None] = lambda: None
) -> float:
    """Real seconds until every added pod has an instance (or `limit` passed)."""
    started = time.monotonic()
    while world.missing() and time.monotonic() - started < limit:
        on_poll()
        time.sleep(0.5)
    if world.missing():
        logs = "\n\n".join(c.log_tail() for c in world.clusters)
        raise RuntimeError(
            f"{world.missing()} pods without an instance after {limit:.0f} s\n{logs}"
        )
    return time.monotonic() - started


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


# --- trickle ----------------------------------------------------------------------------


def bench_trickle(
    workdir: Path,
    pods: int = TRICKLE_PODS,
    spacing: float = TRICKLE_SPACING,
    quota: tuple[int, int, int] = DEFAULT_QUOTA,
    start: datetime | None = None,
) -> dict[str, Any]:
    with quota_world(workdir, quota=quota, start=start) as world:
        clock_start = world.clock.now().isoformat()
        [cluster] = world.clusters
        cluster.start_reconciler(world.runpod.base_url)
        wait_for_first_ticks(world)
        mark = len(world.runpod.requests)
        for index in range(pods):
            cluster.add_pods(f"trickle{index}", 1, world.clock)
            time.sleep(spacing)
        wait_for_instances(world, DRAIN_LIMIT_SECONDS)
        log = RunPodLog.since(world, mark)
        created = world.created_at()
        latency = [created[(cluster.owner_id, uid)] - added for uid, added in cluster.added.items()]
    lists = log.count("GET /v2/pods")
    return {
        "pods": pods,
        "quota": quota,
        "clock_start": clock_start,
        "requests": log.total,
        "by_kind": log.by_kind(),
        "lists": lists,
        "list_share": lists / log.total,
        "creates_ok": log.count("POST /v2/pods", 201),
        "creates_refused": log.count("POST /v2/pods", 400),
        "throttled": log.throttled,
        "latency_p50_s": statistics.median(latency),
        "latency_p95_s": percentile(latency, 0.95),
        "latency_max_s": max(latency),
    }


def trickle_targets(r: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [
        (
            "trickle: every pod created",
            f"{r['creates_ok']}/{r['pods']}",
            r["creates_ok"] >= r["pods"],
        ),
        ("trickle: 0 x 429", str(r["throttled"]), r["throttled"] == 0),
        (
            "trickle: lists <= 25% of RunPod requests",
            f"{r['list_share']:.1%}",
            r["list_share"] <= 0.25,
        ),
        (
            "trickle: refused creates <= 5% of pods",
            f"{r['creates_refused']}",
            r["creates_refused"] <= 0.05 * r["pods"],
        ),
        (
            "trickle: p95 pod-to-create <= 10 s",
            f"{r['latency_p95_s']:.1f} s",
            r["latency_p95_s"] <= 10,
        ),
    ]


# --- burst ------------------------------------------------------------------------------


def scaled(scale: int) -> tuple[int, int, int]:
    minute, hour, day = DEFAULT_QUOTA
    return minute * scale, hour * scale, day * scale


def bench_burst(workdir: Path, pods: int = BURST_PODS, scale: int = SCALE) -> dict[str, Any]:
    quota = scaled(scale)
    with quota_world(workdir, quota=quota, gpu_types=ample_capacity()) as world:
        [cluster] = world.clusters
        cluster.start_reconciler(world.runpod.base_url)
        wait_for_first_ticks(world)
        mark = len(world.runpod.requests)
        started = world.clock.monotonic()
        cluster.add_pods("burst", pods, world.clock)
        wall = wait_for_instances(world, DRAIN_LIMIT_SECONDS)
        log = RunPodLog.since(world, mark)
        last_create = max(world.created_at().values())
    seconds = last_create - started
    allowed = allowed_requests(quota, started, last_create)
    creates = log.count("POST /v2/pods", 201)
    return {
        "pods": pods,
        "quota": quota,
        "sim_seconds": seconds,
        "started_at": started,
        "last_create_at": last_create,
        "wall_seconds": wall,
        "requests": log.total,
        "by_kind": log.by_kind(),
        "creates": creates,
        "allowed": allowed,
        "window_share": creates / allowed,
        "throttled": log.throttled,
    }


def allowed_requests(quota: tuple[int, int, int], start: float, end: float) -> int:
    """What the windows let through from `start` to `end`: every window instance the
    burst touched, the two at the edges whole (the simulator aligns windows to whole
    minutes, hours and days of its clock), the tightest window kind deciding."""
    return min(
        q * (math.floor(end / length) - math.floor(start / length) + 1)
        for q, length in zip(quota, (60, 3600, 86400), strict=True)
    )


def burst_targets(r: dict[str, Any]) -> list[tuple[str, str, bool]]:
    found = [
        (f"burst of {r['pods']} in the loop: 0 x 429", str(r["throttled"]), r["throttled"] == 0)
    ]
    # A burst within a few windows is dominated by its edge windows, counted whole.
    if r["allowed"] >= MIN_BURST_WINDOWS * r["quota"][0]:
        found.append(
            (
                f"burst of {r['pods']} in the loop: creates >= 85% of what the windows allow",
                f"{r['creates']}/{r['allowed']} = {r['window_share']:.1%}",
                r["window_share"] >= 0.85,
            )
        )
    return found


# --- three clusters on one key --------------------------------------------------------


def bench_clusters(
    workdir: Path, pods: int = CLUSTER_PODS, scale: int = SCALE, clusters: int = 3
) -> dict[str, Any]:
    quota = scaled(scale)
    with quota_world(workdir, clusters=clusters, quota=quota, gpu_types=ample_capacity()) as world:
        for cluster in world.clusters:
            cluster.start_reconciler(world.runpod.base_url)
        wait_for_first_ticks(world)
        mark = len(world.runpod.requests)
        started = world.clock.monotonic()
        for cluster in world.clusters:
            cluster.add_pods("burst", pods, world.clock)
        contended: dict[str, int] = {}

        def note_first_done() -> None:
            if not contended and any(done(world, c) for c in world.clusters):
                contended.update(creates_by_owner(world))

        wait_for_instances(world, DRAIN_LIMIT_SECONDS, note_first_done)
        note_first_done()
        log = RunPodLog.since(world, mark)
        first_minute = creates_by_owner(world, before=started + 60)
    total = sum(contended.values())
    first_total = sum(first_minute.values())
    return {
        "clusters": clusters,
        "pods_each": pods,
        "quota": quota,
        "requests": log.total,
        "by_kind": log.by_kind(),
        "throttled": log.throttled,
        "creates_while_contended": contended,
        "shares_while_contended": {owner: n / total for owner, n in contended.items()},
        "creates_first_minute": first_minute,
        "shares_first_minute": {owner: n / first_total for owner, n in first_minute.items()},
    }


def done(world: QuotaWorld, cluster: Cluster) -> bool:
    created = world.created_at()
    return all((cluster.owner_id, uid) in created for uid in cluster.added)


def creates_by_owner(world: QuotaWorld, before: float = math.inf) -> dict[str, int]:
    """Instances created per cluster (before `before`, simulated seconds)."""
    owners = {c.owner_id for c in world.clusters}
    counts = Counter(
        owner for (owner, _uid), at in world.created_at().items() if owner in owners and at < before
    )
    return {owner: counts.get(owner, 0) for owner in sorted(owners)}


def clusters_targets(r: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [
        ("three clusters: 0 x 429", str(r["throttled"]), r["throttled"] == 0),
        *(
            (
                f"three clusters: each >= 25% of the creates {span}",
                ", ".join(f"{owner.split('/')[0]} {share:.1%}" for owner, share in shares.items()),
                bool(shares) and min(shares.values()) >= 0.25,
            )
            for span, shares in (
                ("until the first was done", r["shares_while_contended"]),
                ("in the first minute", r["shares_first_minute"]),
            )
        ),
    ]


# --- command line ------------------------------------------------------------------------

SCENARIOS: dict[
    str,
    tuple[Callable[..., dict[str, Any]], Callable[[dict[str, Any]], list[tuple[str, str, bool]]]],
] = {
    "trickle": (bench_trickle, trickle_targets),
    "burst": (bench_burst, burst_targets),
    "clusters": (bench_clusters, clusters_targets),
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--scenario", choices=list(SCENARIOS), nargs="+", default=list(SCENARIOS))
    parser.add_argument(
        "--trickle-quota",
        type=int,
        nargs=3,
        metavar=("MINUTE", "HOUR", "DAY"),
        default=DEFAULT_QUOTA,
        help="the trickle's quota windows (default: the contract's example)",
    )
    parser.add_argument(
        "--trickle-start",
        type=datetime.fromisoformat,
        help="the simulated clock's start for the trickle, e.g. 2026-01-01T00:00:00+00:00 "
        "for a whole day to go (default: the wall clock's time, like every scenario)",
    )
    parser.add_argument("--burst-pods", type=int, default=BURST_PODS)
    parser.add_argument("--burst-quota-scale", type=int, default=SCALE)
    parser.add_argument("--cluster-pods", type=int, default=CLUSTER_PODS)
    parser.add_argument("--clusters-quota-scale", type=int, default=SCALE)
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument(
        "--keep-logs",
        type=Path,
        metavar="DIR",
        help="run in DIR and keep the reconcilers' logs there",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run_record = perf_record.Run("quota", argv)
    options: dict[str, dict[str, Any]] = {
        "trickle": {"quota": tuple(args.trickle_quota), "start": args.trickle_start},
        "burst": {"pods": args.burst_pods, "scale": args.burst_quota_scale},
        "clusters": {"pods": args.cluster_pods, "scale": args.clusters_quota_scale},
    }
    results: dict[str, Any] = {}
    checked: list[tuple[str, str, bool]] = []
    for name in args.scenario:
        run, targets = SCENARIOS[name]
        print(f"running {name} ...", file=sys.stderr, flush=True)
        if args.keep_logs:
            workdir = args.keep_logs / name
            workdir.mkdir(parents=True, exist_ok=True)
            results[name] = run(workdir, **options[name])
        else:
            with tempfile.TemporaryDirectory(prefix=f"bench-quota-{name}-") as temporary:
                results[name] = run(Path(temporary), **options[name])
        print(f"{name}: {json.dumps(results[name], indent=1)}", flush=True)
        checked += targets(results[name])
    print()
    for target, measured, met in checked:
        print(f"[{'met' if met else 'MISSED'}] {target}: {measured}")
    if args.json:
        run_record.write(
            args.json,
            {
                "results": results,
                "targets": [{"name": n, "measured": m, "met": ok} for n, m, ok in checked],
            },
        )
    return 0 if all(met for _target, _measured, met in checked) else 1


if __name__ == "__main__":
    sys.exit(main())
