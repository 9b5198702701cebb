"""What `reconciler demo --keep-running` prints for a person to try: commands that work
as printed against the running demo, and what to know before running commands in its
simulated instances."""

from __future__ import annotations

import shlex
from pathlib import Path

from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.sim.runpod.net import PROXY_COMMAND

EXEC_CAVEAT = (
    "About exec, cp and port-forward in the demo: a simulated instance has no container. "
    "Its commands run on this machine, as you, in a directory of the demo's that stands "
    "for the instance's filesystem: only /tmp, /workspace and /root (and a network "
    "volume's mount path) are redirected there; any other path is this machine's own. "
    "Run nothing there you would not run in this shell."
)


def connection_help(box: Sandbox, examples: dict[str, Path]) -> list[str]:
    """Commands that work as printed against the running demo, one per line."""
    kubectl = f"kubectl --kubeconfig {box.kubeconfig}"
    url, database = box.runpod_sim.base_url, box.database_url
    files = " ".join(f"-f {path}" for path in examples.values())
    job_instance = (
        f"$({kubectl} get pod -l job-name=gpu-job "
        "-o jsonpath='{.items[0].metadata.annotations.runpod\\.io/pod-id}')"
    )
    return [
        f"{kubectl} get nodes",
        f"{kubectl} apply {files}",
        f"{kubectl} get pods -A",
        f"{kubectl} logs -n ml train",
        f"{kubectl} describe pod gpu-notebook",
        f"{kubectl} exec gpu-notebook -- sh -c 'echo hello from $(hostname)'",
        f"{kubectl} cp {examples['gpu-pod.yaml']} gpu-notebook:/workspace/gpu-pod.yaml",
        f"{kubectl} port-forward gpu-notebook 8888:8888",
        f"{kubectl} top pod -n ml prep",
        # The claim's volume outlives its pod: the next pod finds what the last wrote.
        f"{kubectl} exec trainer -- sh -c 'echo step 100 > /checkpoints/latest'",
        f"{kubectl} delete pod trainer",
        f"{kubectl} get pvc,pv",
        f"{kubectl} apply -f {examples['checkpoints.yaml']}",
        f"{kubectl} exec trainer -- cat /checkpoints/latest",
        # The simulated Job's process runs until told to end, as RunPod's simulator
        # lets a test end it: exit code 0 completes the Job.
        f"curl -s -X POST {url}/_sim/pods/{job_instance}/exit -d '{{\"code\": 0}}'",
        f"{kubectl} get job gpu-job",
        f"reconciler --database-url {database} state show",
        # What the pods have cost so far: RunPod bills whole hours, read hourly, so a
        # pod of the last minutes shows at list price, marked so.
        f"reconciler --database-url {database} cost",
        # The same exec without the kubelet endpoint (CronJob mode), with the demo's key;
        # the simulated instances are reached through the simulator's network.
        f"RUNPOD_API_KEY={API_KEY} reconciler --database-url {database} exec "
        f"default/gpu-notebook --kubeconfig {box.kubeconfig} --runpod-url {url} "
        f"--ssh-key-file {box.workdir / 'ssh-key'} "
        f"--ssh-proxy-command {shlex.quote(PROXY_COMMAND)} -- sh -c 'echo hello from $(hostname)'",
        # What a pod would get, ranked as the planner ranks, from the catalog the
        # reconciler keeps (the key and URL only for a copy older than --catalog-ttl).
        f"RUNPOD_API_KEY={API_KEY} reconciler --database-url {database} offers "
        f"-f {examples['gpu-pod.yaml']} --runpod-url {url}",
        f"RUNPOD_API_KEY={API_KEY} reconciler --database-url {database} sync --once --dry-run "
        f"--kubeconfig {box.kubeconfig} --runpod-url {url}",
        f"{kubectl} get pods -l batch.kubernetes.io/job-name=torchrun "
        "-o 'custom-columns=NAME:.metadata.name,STATUS:.status.phase,HOST:.status.hostIP,"
        "RANK:.metadata.annotations.runpod\\.io/rank'",
        f"{kubectl} delete {files}",
    ]
