"""What every cloud resource plugs into the tick with (docs/architecture.md §3, "Cloud
resources"): the runtime half of one resource, whose pure half is its module in
`core/resources/`.

A resource gives the executor its `Steps` for each run (the actions it carries out,
through the run's one `Journal`), and the engine its phase after the pods' actions
(collection, provisioning: `after_pods`) and the hourly price of what it keeps that
the pod list does not show (`standing_spend`, counted in the spend caps). The engine
and the executor loop over the registered resources (`runtime/resources/__init__.py`)
in order and know none of them by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from reconciler.core.actions import Action
from reconciler.runtime.journal import Journal
from reconciler.runtime.tick_report import TickReport


class Steps(Protocol):
    """One resource's side of one run."""

    actions: tuple[type[Action], ...]
    """The actions it carries out."""

    def apply(self, action: Action) -> None:
        """Carry out one of `actions`; raising fails that action only."""

    def unrecorded(self) -> int:
        """Called once at the end of the run: how many of its creates may have made a
        resource that no Kubernetes object names yet (a `--once` writer's hold)."""


StepsType = TypeVar("StepsType")


@dataclass(frozen=True)
class AfterPods:
    """What a resource's phase after the pods' actions is handed."""

    report: TickReport
    run: Callable[[Sequence[Action]], None]
    """Carry out actions decided now, journaled, counted in the tick's report."""
    steps: Callable[[type[object]], object]
    """This run's steps of a resource, by type (what the pods' actions used)."""

    def steps_of(self, kind: type[StepsType]) -> StepsType:
        found = self.steps(kind)
        assert isinstance(found, kind)
        return found


class Resource(Protocol):
    """One cloud resource, registered once (`runtime/resources/__init__.py`)."""

    def steps(self, journal: Journal) -> Steps:
        """Its steps for one run of the executor."""

    def after_pods(self, tick: AfterPods) -> None:
        """Its phase once the tick's plan has run (nothing when it has none)."""

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        """USD per hour, by namespace (None: no namespace's), of what it keeps that the
        pod list does not show, for the spend caps of a tick that may create."""
