"""`reconciler demo`: the product at work on one machine, against the built-in simulators.

A short scripted scenario on the simulated clock; every step is a real tick of the
real engine over loopback HTTP. It prints one line per Kubernetes Event as the
reconciler records them, then the mapping table and a summary with the checks that
matter: no duplicate and no leaked instance.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from reconciler.adapters.store import queries
from reconciler.adapters.store.db import make_engine, session_factory
from reconciler.cli import state_view
from reconciler.core.actions import Terminate
from reconciler.core.config import Settings
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.demo.examples import write_examples
from reconciler.demo.live import TICK_SECONDS, LiveWorld
from reconciler.demo.printed import EXEC_CAVEAT, connection_help
from reconciler.demo.sandbox import Sandbox
from reconciler.demo.services import service_commands, start_services
from reconciler.runtime.process.wiring import LockKeeper, holding
from reconciler.sim.kube.status import ApiError

Echo = Callable[[str], None]

# Instances the scenario makes itself, as if left over (the orphan), not the reconciler.
PLANTED_INSTANCES = 1

DEMO_SETTINGS = Settings.of(create_grace_time=30, orphan_grace_time=60, max_pending_time=300)


# Seconds between node heartbeats while simulated time passes: the loop's default.
HEARTBEAT_SECONDS = 10.0

# The scenario's clock starts this long before the real time, so that when it is over
# the simulated world is not ahead of the clocks of the person using it (kubectl's ages).
HEAD_START_SECONDS = 600


@dataclass
class DemoResult:
    """What the demo did at RunPod. The counts add up: created + planted = terminated +
    running, and `created` includes the in-doubt creates (made, answer lost, adopted)."""

    created: int = 0
    in_doubt: int = 0
    planted: int = 0
    terminated: int = 0
    running: int = 0
    duplicates: int = 0
    leaked: list[str] = field(default_factory=list)
    pods: dict[str, str] = field(default_factory=dict)
    cost_per_hr: float = 0.0
    commands: list[str] = field(default_factory=list)
    """With --keep-running: what to try while the world runs on."""


class _Narrator:
    """Prints what happened since the last look: new Events, one line each."""

    def __init__(self, box: Sandbox, echo: Echo) -> None:
        self.box, self.echo = box, echo
        # Whole seconds, as the Events' times are.
        self.start = box.clock.now().replace(microsecond=0)
        self.seen: set[tuple[str, int]] = set()
        self.last = self.start
        """The latest moment printed: the story's stamps never go back."""

    def say(self, text: str) -> None:
        self.echo(f"\n{self._stamp()}  == {text}")

    def events(self) -> None:
        """New Events in the order things happened: RunPod's own lines about an instance
        are recorded when read, often after what followed them, but carry their own time."""
        fresh = [
            e
            for e in self.box.kube_sim.list("events", None)
            if (e["metadata"]["uid"], e.get("count", 1)) not in self.seen
        ]
        for event in sorted(fresh, key=_happened):
            self.seen.add((event["metadata"]["uid"], event.get("count", 1)))
            target = event["involvedObject"]
            happened = _happened(event)[0]
            # A line RunPod logged earlier but the reconciler read only now is told now,
            # with its own time, so that the timeline runs forwards.
            late = f" (at {self._stamp(happened)})" if happened < self.last else ""
            self.echo(
                f"{self._stamp(max(happened, self.last))}  {target.get('namespace')}/"
                f"{target.get('name'):<14} {event['reason']:<26} {event['message']}{late}"
            )

    def tick(self, advance: float = 0) -> None:
        self._pass(advance)
        report = self.box.tick()
        self.events()
        for action in report.actions:
            # An orphan has no pod to carry an Event, so the demo reports it itself.
            if isinstance(action, Terminate) and action.pod is None:
                self.echo(
                    f"{self._stamp()}  {'(no pod)':<17} {'TerminatedOrphan':<26} "
                    f"terminated RunPod instance {action.instance_id}: {action.detail}"
                )

    def _pass(self, seconds: float) -> None:
        """Simulated time passes with the node's heartbeat going on, as a deployed
        reconciler's does between ticks, so the node stays Ready (and the heartbeat has
        no late Lease to warn about)."""
        _advance_to(self.box, self.box.clock.now() + timedelta(seconds=seconds))

    def _stamp(self, moment: datetime | None = None) -> str:
        now = self.box.clock.now() if moment is None else moment
        self.last = max(self.last, now.replace(microsecond=0))
        elapsed = int((now - self.start).total_seconds())
        return f"[t+{elapsed // 60:02d}:{elapsed % 60:02d}]"


def _happened(event: dict[str, Any]) -> tuple[datetime, int]:
    """When an Event last happened (Events are stamped to the second), then the order the
    API server stored them in."""
    stamp = datetime.fromisoformat(event["lastTimestamp"].replace("Z", "+00:00"))
    return stamp, int(event["metadata"].get("resourceVersion", "0"))


def run_demo(
    echo: Echo,
    keep_running: bool = False,
    wait: Callable[[LiveWorld], None] | None = None,
    on_result: Callable[[DemoResult], None] | None = None,
) -> DemoResult:
    """Run the scenario; with `keep_running`, `on_result` hears the summary before `wait`
    runs the world on in real time (kubectl needs TLS then)."""
    box = Sandbox(DEMO_SETTINGS, tls=keep_running, startup_lines="read")
    # Before start: no node yet, so no heartbeat to keep.
    start = datetime.now(UTC) - timedelta(seconds=HEAD_START_SECONDS)
    box.advance(max(0.0, (start - box.clock.now()).total_seconds()))
    with box:
        if keep_running:
            # The demo's own key, made in its directory: instances run sshd with it, so
            # `kubectl exec`, `cp` and `port-forward` work (before the kubelet starts).
            box.enable_ssh(str(box.workdir / "ssh-key"))
            box.start_kubelet()  # `kubectl logs` reaches it through the node's address
            box.trust_kubelet()  # no warning about an unverified kubelet in the story
        narrator = _Narrator(box, echo)
        echo(
            f"RunPod simulator at {box.runpod_sim.base_url}, "
            f"Kubernetes simulator at {box.kube_sim.base_url}"
        )
        _scenario(box, narrator)
        result = _summarise(box, echo)
        if not keep_running:
            if on_result is not None:
                on_result(result)
            return result
        install_storage_class(box)
        box.add_pod("prep", namespace="ml", extra_spec={"containers": [CPU_CONTAINER]})
        backend = start_services(box)
        world = LiveWorld(box)
        measured = _warm_up(box, world)
        _advance_to(box, datetime.now(UTC))
        paths = write_examples(box.workdir)
        result.commands = connection_help(box, paths) + service_commands(
            f"kubectl --kubeconfig {box.kubeconfig}"
        )
        echo(
            "\nThe simulators keep running in real time, and the reconciler ticks every "
            f"{TICK_SECONDS:g} s. Try, in another shell:"
        )
        for command in result.commands:
            echo(f"  {command}")
        echo(f"\n{EXEC_CAVEAT}")
        if not measured:
            echo("`kubectl top` has figures of ml/prep once it has run for a minute.")
        if on_result is not None:
            on_result(result)
        with holding(LockKeeper(box.store, box.clock.now)) as lock:
            world.go_live(lock, echo)
            echo("\nWhat the reconciler does from now on is told here, one line each:")
            if wait is not None:
                wait(world)
        backend.shutdown()
    return result


# A CPU pod beside the GPU ones: `kubectl top` shows CPU pods (a GPU instance's CPU and
# memory have no base to measure against, so it leaves those out).
CPU_CONTAINER = {
    "name": "main",
    "image": "python:3.11",
    "command": ["python", "-m", "http.server", "8000"],
    "resources": {"requests": {"cpu": "3", "memory": "6Gi"}},
}

METRICS = "metrics.k8s.io/v1beta1"
WARM_UP_BEAT_SECONDS = 5.0
WARM_UP_LIMIT_SECONDS = 600.0


def _warm_up(box: Sandbox, world: LiveWorld) -> bool:
    """Simulated time runs on until the CPU pod `prep` runs and metrics-server has a
    figure of it, before the commands are printed: the printed `kubectl top` then
    answers at once (its rate needs two scrapes). False if it never did."""
    waited = 0.0
    while waited < WARM_UP_LIMIT_SECONDS:
        world.beat(WARM_UP_BEAT_SECONDS)
        box.heartbeat.keep_alive()
        waited += WARM_UP_BEAT_SECONDS
        with contextlib.suppress(ApiError):
            box.kube_sim.metrics.answer(f"/apis/{METRICS}/namespaces/ml/pods/prep")
            return True
    return False


SHIPPED_STORAGE = Path(__file__).parents[2] / "deploy" / "common" / "storageclass.yaml"


def install_storage_class(box: Sandbox) -> None:
    """The StorageClass and CSIDriver that an install applies (deploy/common), so that
    the README's claim works as written."""
    for document in yaml.safe_load_all(SHIPPED_STORAGE.read_text()):
        plural = {"StorageClass": "storageclasses", "CSIDriver": "csidrivers"}[document["kind"]]
        box.kube_sim.put(plural, document)


def _advance_to(box: Sandbox, moment: datetime) -> None:
    """Move the simulated clock to `moment` with the node's heartbeat going on meanwhile,
    as a running reconciler's does: the jump is the demo's, not an absent reconciler's,
    so the node stays Ready and no late Lease is reported."""
    seconds = max(0.0, (moment - box.clock.now()).total_seconds())
    while seconds > 0:
        step = min(seconds, HEARTBEAT_SECONDS)
        box.advance(step)
        box.heartbeat.keep_alive()
        seconds -= step


def _scenario(box: Sandbox, n: _Narrator) -> None:
    n.say("four pods land on the virtual node")
    box.add_pod(
        "train",
        namespace="ml",
        command=["python", "train.py", "--epochs", "3"],
        restart_policy="Never",
    )
    box.add_pod("notebook", namespace="ml", image="jupyter/base-notebook", ports=[8888, 22])
    box.add_pod("huge", namespace="ml", annotations={"runpod.io/required-gpu-memory": "640"})
    box.add_pod("scratch", namespace="ml")
    n.tick()
    n.say("instances boot (simulated time passes)")
    n.tick(advance=10)
    n.tick(advance=20)
    _show_endpoints(box, n)

    n.say("the training process exits 0; its instance stops itself")
    box.runpod_sim.logs.write_container(
        _instance_id(box, "ml", "train"),
        [
            "epoch 1/3 loss 0.91",
            "epoch 2/3 loss 0.54",
            "epoch 3/3 loss 0.31",
            "saved the model to /workspace/model.pt",
        ],
    )
    box.runpod_sim.exit_process(_instance_id(box, "ml", "train"), 0)
    n.tick(advance=5)
    n.tick(advance=5)

    n.say("the cluster has no GPU left for the managed Job ml/finetune; its pod is offloaded")
    box.add_job(
        "finetune",
        namespace="ml",
        annotations={"runpod.io/managed": "true"},
        command=["python", "finetune.py"],
        bound=False,
    )
    # The Job controller made its pod; the scheduler finds no GPU for it.
    [finetune] = [p["metadata"]["name"] for p in box.job_pods("finetune", "ml")]
    box.kube_sim.make_unschedulable("ml", finetune)
    n.tick(advance=1)
    n.tick(advance=1)
    n.tick(advance=30)
    box.runpod_sim.exit_process(_instance_id(box, "ml", finetune), 0)
    n.tick(advance=5)

    n.say("a user deletes ml/scratch while it runs")
    box.kube_sim.delete_pod("ml", "scratch", grace_seconds=30)
    n.tick(advance=1)
    n.tick(advance=5)

    n.say("an instance whose pod no longer exists (a leftover from a force-deleted pod)")
    box.runpod_sim.add_instance(
        name="ml-forgotten",
        env={OWNER_ENV: box.settings.owner_id, POD_UID_ENV: "uid-of-a-pod-that-is-gone"},
    )
    n.tick(advance=1)
    n.tick(advance=DEMO_SETTINGS.timing.orphan_grace_time + 5)

    n.say(
        "a create succeeds at RunPod but the answer is lost (HTTP 500), then the "
        "reconciler restarts"
    )
    box.runpod_sim.faults.create_then_fail(1, status=500)
    box.add_pod("serve", namespace="ml", image="vllm/vllm-openai", ports=[8000])
    with _scripted_fault(n):
        n.tick(advance=1)
    box.restart()
    n.echo(f"{n._stamp()}  (reconciler restarted: new process state, same database)")
    n.tick(advance=10)
    n.tick(advance=30)


@contextlib.contextmanager
def _scripted_fault(n: _Narrator) -> Iterator[None]:
    """While a fault the demo injects plays out, the reconciler's warnings about it are
    told as part of the story, labelled as the scripted fault they are, not printed as
    a WARNING of something wrong."""

    def relabel(record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        n.echo(f"{n._stamp()}  (scripted fault) the reconciler logs: {record.getMessage()}")
        return False

    root = logging.getLogger()
    handlers = list(root.handlers) or [h for h in (logging.lastResort,) if h is not None]
    for handler in handlers:
        handler.addFilter(relabel)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(relabel)


def _instance_id(box: Sandbox, namespace: str, name: str) -> str:
    pod = box.pod(name, namespace)
    assert pod is not None, f"{namespace}/{name} is gone"
    return str(pod["metadata"]["annotations"]["runpod.io/pod-id"])


def _show_endpoints(box: Sandbox, n: _Narrator) -> None:
    pod = box.pod("notebook", "ml") or {}
    ports = (pod.get("metadata", {}).get("annotations") or {}).get("runpod.io/port-mappings")
    phase = pod.get("status", {}).get("phase")
    n.echo(f"{n._stamp()}  ml/notebook is {phase}; endpoints: {ports}")


def _summarise(box: Sandbox, echo: Echo) -> DemoResult:
    result = DemoResult(planted=PLANTED_INSTANCES)
    for request in box.runpod_sim.requests:
        if request.method == "POST" and request.path == "/v2/pods":
            # A 5xx create made its instance anyway in this scenario (faults.create_then_fail).
            result.created += request.status == 201 or request.status >= 500
            result.in_doubt += request.status >= 500
        if request.method == "DELETE" and request.status == 204:
            result.terminated += 1
    live = box.owned_instances()
    result.running = len(live)
    result.cost_per_hr = sum(float(i.get("cost") or 0) for i in live)
    pods = {p["metadata"]["uid"]: p for p in box.kube_sim.list("pods", None)}
    result.pods = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p.get("status", {}).get(
            "phase", "?"
        )
        for p in pods.values()
    }
    by_pod: dict[str, int] = {}
    for instance in live:
        uid = instance["env"].get(POD_UID_ENV, "")
        by_pod[uid] = by_pod.get(uid, 0) + 1
        if uid not in pods:
            result.leaked.append(instance["id"])
    result.duplicates = sum(count - 1 for count in by_pod.values())
    echo("\n" + _state_table(box))
    echo(_summary_lines(result))
    return result


def _state_table(box: Sandbox) -> str:
    engine = make_engine(box.database_url)
    with session_factory(engine)() as session:
        rows = queries.mappings(session, include_finished=True)
    engine.dispose()
    now = box.clock.now()
    return state_view.render_table([state_view.table_row(r, now) for r in rows])


def _summary_lines(result: DemoResult) -> str:
    phases = ", ".join(f"{name} {phase}" for name, phase in sorted(result.pods.items()))
    return "\n".join(
        [
            "",
            f"pods now:            {phases}",
            f"instances created:   {result.created} ({result.in_doubt} of them answered "
            "HTTP 500, existed anyway and was adopted, not duplicated)",
            f"instances planted:   {result.planted} (the leftover of a force-deleted pod)",
            f"instances terminated: {result.terminated}",
            f"instances running:   {result.running} (${result.cost_per_hr:.2f}/h)",
            f"duplicates:          {result.duplicates}",
            f"leaked instances:    {len(result.leaked)}",
        ]
    )


def summary_record(result: DemoResult) -> dict[str, Any]:
    record = {
        "created": result.created,
        "in_doubt": result.in_doubt,
        "planted": result.planted,
        "terminated": result.terminated,
        "running": result.running,
        "duplicates": result.duplicates,
        "leaked": result.leaked,
        "pods": result.pods,
        "cost_per_hr": result.cost_per_hr,
    }
    if result.commands:
        record["commands"] = result.commands
    return record
