"""What replacing starts that do not finish costs, when 30 % of RunPod's hosts fail them.

    python tests/perf/bench_starts.py [--pods N] [--seed S]

Runs `start_world`'s scenario (the sandbox, its simulated clock, ticks every 15 s,
`--start-timeout` 300 s) and prints: which pools fail and how, how long each pod took to
run (the longest, in start timeouts), how long each failed instance billed past its
failure (the longest, and whether the first tick after it deleted it), what the
replacements cost in RunPod requests, and what a steady tick costs once every pod runs.
The Deployment follows at most 16 starting pods' lines at once (`MAX_STREAMS`): with more
pods starting together, a failure the lines show may wait a tick for a stream.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

import perf_record
from start_world import START_TIMEOUT, TICK, Figures, run


def report(figures: Figures) -> list[str]:
    slowest = max(figures.running_after.values(), default=float("nan"))
    billed = max(figures.billed_past_failure.values(), default=0.0)
    creates, deletes = figures.requests["POST"], figures.requests["DELETE"]
    done = max(1, figures.replacements)
    per_replacement = (creates - figures.pods + deletes + figures.reads_by_id) / done
    return [
        f"failing pools: {', '.join(figures.failing_pools)}",
        f"pods running: {len(figures.running_after)}/{figures.pods} after {figures.ticks} ticks",
        f"slowest pod to run: {slowest:.0f} s = {slowest / START_TIMEOUT:.2f} start timeouts",
        f"failed starts replaced: {figures.replacements}",
        f"longest billed past a failure: {billed:.0f} s (interval {TICK:.0f} s, plus the "
        f"deleting tick's own pacing); deleted by the tick after the failure: "
        f"{_ticks(figures)}",
        f"RunPod requests: {dict(figures.requests)}; creates {creates} = {figures.pods} pods + "
        f"{creates - figures.pods} replacements, deletes {deletes}",
        f"requests per replacement: {per_replacement:.2f} (a DELETE, a GET by id that finds "
        f"it gone: {figures.reads_by_id} in all, a POST)",
        f"steady tick afterwards: {len(figures.steady)} RunPod request(s): {figures.steady}",
    ]


def _ticks(figures: Figures) -> str:
    late = max(figures.ticks_past_failure.values(), default=0)
    return "every one" if late <= 1 else f"no: up to {late} ticks"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the figures here (perf_record)")
    args = parser.parse_args(argv)
    run_record = perf_record.Run("starts", argv)
    figures = run(args.pods, args.seed)
    print("\n".join(report(figures)))
    if args.json:
        run_record.write(
            args.json,
            {
                "seed": args.seed,
                **asdict(figures),
                "requests": dict(figures.requests),  # asdict would count a Counter's pairs
                "replacements": figures.replacements,
            },
        )
    ok = (
        len(figures.running_after) == figures.pods
        and max(figures.running_after.values()) <= 2 * START_TIMEOUT
        and max(figures.ticks_past_failure.values(), default=0) <= 1
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
