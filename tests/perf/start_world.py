"""A world where 30 % of RunPod's hosts fail their start, for the start-replacement
scenario (`bench_starts.py` prints its figures, `test_starts_smoke.py` asserts them).

The sandbox (both simulators over loopback HTTP, one simulated clock) with the default
catalog: ten pools of hosts (GPU type, data center) have free GPUs. Three of them, drawn
by a seed among the pools pods land on first (each type's most free), fail every start,
each in another way a RunPod start fails: the hosts' CUDA driver is older than the image needs
(nvidia-container-cli's requirement error), the driver cannot initialise the GPU (an
nvml error), or the start hangs without a word (only `--start-timeout` finds it). Every
pod runs one image that needs CUDA 12.6 and whose tag does not say so, and allows one GPU
type (round robin over the four with more than one pool), so pods land on every pool;
each pool has room for every pod, so that only failed starts, never stock, hold a pod.
The reconciler ticks every TICK seconds and follows the starting pods' system lines as
the Deployment does (a stream each, in the background); before each tick the scenario
waits, a bounded real-time poll, until every line RunPod has written by then on a
followed instance has been seen, as it would have been in the tick's interval.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.core.config import Settings
from reconciler.demo.sandbox import Sandbox

TICK = 15.0
START_TIMEOUT = 300.0
IMAGE = "ghcr.io/acme/train:2024.11"
TYPES = (
    "NVIDIA GeForce RTX 4090",
    "NVIDIA RTX A6000",
    "NVIDIA L40S",
    "NVIDIA A100 80GB PCIe",
)
MODES = ("cuda", "gpu", "stuck")
FAILING_SHARE = 0.3
PULL_SECONDS = 60.0


@dataclass
class Figures:
    pods: int
    failing_pools: list[str]
    running_after: dict[str, float] = field(default_factory=dict)
    """Seconds from the pods' creation to the tick that showed each Running."""
    billed_past_failure: dict[str, float] = field(default_factory=dict)
    """By failed instance: seconds it billed after its start failed (its failure's line,
    or its create plus the start timeout for a hang)."""
    ticks_past_failure: dict[str, int] = field(default_factory=dict)
    """By failed instance: the ticks that began after its failure, up to and with the
    one that deleted it (1: the first tick after the failure did)."""
    requests: Counter[str] = field(default_factory=Counter)
    """RunPod requests of the whole run, by method."""
    reads_by_id: int = 0
    """GETs of failed instances by id: each is gone only once RunPod says so."""
    steady: list[str] = field(default_factory=list)
    """The RunPod requests of a steady tick once every pod runs."""
    ticks: int = 0

    @property
    def replacements(self) -> int:
        return len(self.billed_past_failure)


def pools(box: Sandbox) -> list[tuple[str, str]]:
    catalog = box.runpod_sim.account.catalog
    return sorted(
        (gpu, dc) for (gpu, dc), free in catalog.free.items() if gpu in TYPES and free > 0
    )


def break_hosts(box: Sandbox, seed: int) -> list[str]:
    """Fail FAILING_SHARE of all pools with free GPUs: of the pools each type's pods land
    on first (the most free), three drawn by `seed`, each in another way."""
    account = box.runpod_sim.account
    every = [*pools(box), ("NVIDIA H100 80GB HBM3", "US-TX-3")]
    count = round(FAILING_SHARE * len(every))
    catalog = account.catalog
    first = [max((p for p in pools(box) if p[0] == gpu), key=catalog.free.get) for gpu in TYPES]
    generator = random.Random(seed)
    chosen = generator.sample(first, count)
    modes = generator.sample(MODES, len(MODES))
    account.set_image_cuda(IMAGE, "12.6")
    for gpu, dc in pools(box):
        account.set_host_cuda(gpu, dc, "12.8")
    for (gpu, dc), mode in zip(chosen, modes, strict=True):
        if mode == "cuda":
            account.set_host_cuda(gpu, dc, "12.2")
        else:
            account.set_host_fault(gpu, dc, mode)
    return [f"{gpu}@{dc}:{mode}" for (gpu, dc), mode in zip(chosen, modes, strict=True)]


def run(pods: int = 20, seed: int = 7) -> Figures:
    settings = Settings.of(start_timeout=START_TIMEOUT, max_creates_per_tick=pods)
    with Sandbox(settings, startup_lines="stream") as box:
        for gpu, dc in pools(box):  # room for every pod in any pool: failures, not stock
            box.runpod_sim.account.set_capacity(
                gpu, dc, max(pods, box.runpod_sim.account.catalog.free[(gpu, dc)])
            )
        figures = Figures(pods, break_hosts(box, seed))
        # A CUDA image of some gigabytes: a minute's pull, after which its start fails.
        box.runpod_sim.account.set_image_pull_seconds(IMAGE, PULL_SECONDS)
        started = box.clock.now()
        for n in range(pods):
            box.add_pod(
                f"train-{n}", image=IMAGE, annotations={"runpod.io/gpu-types": TYPES[n % 4]}
            )
        failed_at: dict[str, datetime] = {}
        tick_starts: list[datetime] = []
        while len(figures.running_after) < pods and figures.ticks < 4 * START_TIMEOUT / TICK:
            _streams_caught_up(box)
            tick_starts.append(box.clock.now())
            box.tick()
            figures.ticks += 1
            _note_failures(box, failed_at)
            for n in range(pods):
                name = f"train-{n}"
                phase = ((box.pod(name) or {}).get("status") or {}).get("phase")
                if phase == "Running" and name not in figures.running_after:
                    figures.running_after[name] = (box.clock.now() - started).total_seconds()
            box.advance(TICK)
        for instance_id, at in failed_at.items():
            ledger = box.runpod_sim.account.ledgers[instance_id]
            end = ledger.deleted_at or box.clock.now()
            figures.billed_past_failure[instance_id] = max(0.0, (end - at).total_seconds())
            figures.ticks_past_failure[instance_id] = sum(1 for t in tick_starts if at <= t <= end)
        figures.requests = Counter(r.method for r in box.runpod_sim.requests)
        figures.reads_by_id = sum(
            r.method == "GET" and r.path.rsplit("/", 1)[-1] in failed_at
            for r in box.runpod_sim.requests
        )
        box.tick()
        box.advance(TICK)
        before = len(box.runpod_sim.requests)
        box.tick()
        figures.steady = [f"{r.method} {r.path}" for r in box.runpod_sim.requests[before:]]
        return figures


def _note_failures(box: Sandbox, failed_at: dict[str, datetime]) -> None:
    """When each instance's start failed, as RunPod would say: its failure's lines, or
    for a hang the moment the start timeout passed."""
    for pod in box.runpod_sim.account.pods.values():
        if pod.start_fails and pod.id not in failed_at:
            lines = [line for line in pod.log if line.source == "system"][1:]
            failed_at[pod.id] = (
                lines[0].ts if lines else pod.created_at + timedelta(seconds=START_TIMEOUT)
            )


def _streams_caught_up(box: Sandbox, seconds: float = 10.0) -> None:
    """Wait until each followed instance's failure lines, written by now, were judged."""
    startup = box.engine.hooks.startup
    assert startup is not None
    now = box.clock.now()
    followed = {r.path.split("/")[3] for r in box.runpod_sim.requests if r.path.endswith("/logs")}
    due = {
        pod.id
        for pod in box.runpod_sim.account.pods.values()
        if pod.id in followed
        and any(line.ts <= now for line in pod.log[1:] if line.source == "system")
    }
    deadline = time.monotonic() + seconds
    while not due <= set(startup.failed_starts()):
        assert time.monotonic() < deadline, f"lines of {due} not seen in {seconds} s"
        time.sleep(0.02)
