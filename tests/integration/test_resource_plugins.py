"""A cloud resource is a plug-in (`runtime/tick/resources/base.py`): registered on the engine,
its phase runs after the pods' actions and its steps carry out its own actions through
the run's journal, with no edit to the engine or the executor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from reconciler.core.actions import Action, Terminate
from reconciler.core.plan.observation import Observation
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.tick.resources.base import AfterPods, Sighting
from reconciler.runtime.tick.run_context import RunContext
from reconciler.runtime.tick.tick_report import TickReport


@dataclass(frozen=True)
class Ping:
    """A toy resource's action: one journaled call that may fail."""

    name: str
    fails: bool = False

    def shown(self) -> tuple[str, str]:
        return self.name, "ping"


class PingSteps:
    actions: tuple[type[Action], ...] = (Ping,)

    def __init__(self, context: RunContext, calls: list[str]) -> None:
        self.context, self.calls = context, calls
        self.made = 0

    def apply(self, action: Action) -> None:
        assert isinstance(action, Ping)
        self.context.journaled("ping", None, action.name, lambda: self._call(action))
        self.made += 1

    def _call(self, action: Ping) -> None:
        self.calls.append(action.name)
        if action.fails:
            raise RuntimeError(f"{action.name} refused")

    def unrecorded(self) -> int:
        return self.made  # as if no Kubernetes object named what it made


class Pings:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.seen_done: list[list[str]] = []
        self.observed = self.planned_ticks = 0

    def steps(self, context: RunContext) -> PingSteps:
        return PingSteps(context, self.calls)

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        return {}

    def billing(self) -> None:
        return None  # not billed apart from instances

    def plan(self, observation: Observation, now: datetime) -> Sequence[Action]:
        return ()  # its actions are decided after the pods'

    def observe(self, sighting: Sighting) -> None:
        self.observed += 1

    def planned(self, report: TickReport) -> None:
        self.planned_ticks += 1

    def after_pods(self, tick: AfterPods) -> None:
        self.seen_done.append([type(a).__name__ for a in tick.report.done])
        if not any(isinstance(a, Terminate) for a in tick.report.done):
            return
        assert isinstance(tick.steps_of(PingSteps), PingSteps)
        tick.run([Ping("first"), Ping("second", fails=True), Ping("third")])


def test_a_registered_resource_runs_after_the_pods_through_the_journal(box: Sandbox) -> None:
    pings = Pings()
    box.engine.resources.append(pings)
    told: list[int] = []
    box.engine.hooks = replace(box.engine.hooks, unrecorded_creates=told.append)
    box.add_pod("a")
    box.tick()
    box.advance(30)
    box.tick()
    assert pings.calls == []  # nothing ended: its phase planned nothing
    box.kube_sim.delete_pod("default", "a", grace_seconds=30)
    report = box.tick()

    assert pings.observed == pings.planned_ticks == 3  # every tick, each phase once
    assert "Terminate" in pings.seen_done[-1]  # the pods' actions ran first
    assert pings.calls == ["first", "second", "third"]  # one failure stops no other
    assert report.applied["Ping"] == 2 and report.failed["Ping"] == 1
    assert any("Ping" in e and "second refused" in e for e in report.errors)
    journal = [(e.kind, e.resource_id, e.outcome) for e in box.store.journal() if e.kind == "ping"]
    assert journal == [
        ("ping", "first", "ok"),
        ("ping", "second", "failed"),
        ("ping", "third", "ok"),
    ]
    # The run's creates not on any object, its steps' included, pass a hold on.
    assert told[-1] >= 2
