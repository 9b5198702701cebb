"""`reconciler demo --keep-running` after its setup, in-process on the simulated clock: it
tells one line per thing a person watching wants to see (a pod placed with its GPU, data
center and price, Running, its instance terminated and gone, a volume provisioned, a
cluster made: a line for each of its pods) and nothing else; `kubectl top`'s pod has
figures when the command is printed; `reconciler cost` shows what the running pods cost
so far, at list price marked as an estimate; and the exec caveat and a working
`reconciler exec` line are printed."""

from __future__ import annotations

import json
from typing import Any

import yaml
from click.testing import CliRunner

from reconciler.app import main
from reconciler.demo.examples import CHECKPOINTS, GPU_POD, TORCHRUN_JOB
from reconciler.demo.live import LiveWorld
from reconciler.demo.printed import EXEC_CAVEAT
from reconciler.demo.run import run_demo

LIVE = "What the reconciler does from now on is told here, one line each:"


def put(world: LiveWorld, text: str) -> None:
    for document in yaml.safe_load_all(text):
        document["metadata"]["namespace"] = "default"
        plural = {"Pod": "pods", "Job": "jobs"}.get(document["kind"], "persistentvolumeclaims")
        world.box.kube_sim.put(plural, document)


def beats(world: LiveWorld, count: int) -> None:
    for _ in range(count):
        world.beat(5)
        world.box.heartbeat.keep_alive()


def test_the_running_demo_tells_what_happens_and_what_it_costs() -> None:
    lines: list[str] = []
    seen: dict[str, Any] = {}

    def drive(world: LiveWorld) -> None:
        box = world.box
        # Printed before this: the top command's pod already has figures.
        seen["top"] = box.kube_sim.metrics.answer(
            "/apis/metrics.k8s.io/v1beta1/namespaces/ml/pods/prep"
        )
        seen["top node"] = box.kube_sim.metrics.answer(
            f"/apis/metrics.k8s.io/v1beta1/nodes/{box.settings.node.name}"
        )
        cost = CliRunner().invoke(main, ["--database-url", box.database_url, "cost"])
        seen["cost"] = cost.output
        as_json = ["--database-url", box.database_url, "cost", "-o", "json"]
        seen["cost_json"] = json.loads(CliRunner().invoke(main, as_json).output)
        put(world, GPU_POD)
        put(world, CHECKPOINTS)
        put(world, TORCHRUN_JOB)
        beats(world, 12)
        box.kube_sim.delete_pod("default", "gpu-notebook", grace_seconds=30)
        beats(world, 6)

    run_demo(lambda text: lines.extend(text.splitlines()), keep_running=True, wait=drive)
    told = lines[lines.index(LIVE) + 1 :]

    def one(*words: str) -> str:
        found = [line for line in told if all(word in line for word in words)]
        assert len(found) == 1, (words, told)
        return found[0]

    placed = one("default/gpu-notebook", "CreatedInstance")
    assert "created RunPod instance" in placed and "/h)" in placed and " in " in placed
    instance = placed.split("created RunPod instance ")[1].split()[0]
    one("default/gpu-notebook", f"Running on RunPod instance {instance}")
    one("default/gpu-notebook", "TerminatingInstance", instance)
    one(f"instance {instance}", "gone from RunPod's list")
    one("pvc default/checkpoints", "ProvisioningSucceeded")
    one("default/trainer", "Running on RunPod instance")
    made = [line for line in told if "CreatedCluster: created RunPod Instant Cluster" in line]
    assert len(made) == 2 and all("default/torchrun-" in line for line in made), told
    assert not [line for line in told if "RunPodSystem" in line], told
    assert len(told) == len(set(told)), told

    assert seen["top"]["containers"][0]["usage"]["cpu"]
    assert seen["top node"]["usage"]["cpu"]
    assert seen["cost_json"]["unbilled_list_usd_by_pod"]["ml/notebook"] > 0
    assert "not billed yet, at list price (an estimate" in seen["cost"]
    assert EXEC_CAVEAT in lines
    assert any("reconciler" in line and " exec default/gpu-notebook " in line for line in lines)
