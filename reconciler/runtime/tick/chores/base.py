"""The points of a tick a chore runs at (`runtime/tick/chores/__init__.py`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from reconciler.core.actions import Action
from reconciler.core.plan.observation import Observed
from reconciler.core.pods.ownership import Ownership
from reconciler.runtime.tick.resources.base import Sighting
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)


class Chore:
    """One chore of every tick; each point does nothing unless the chore says otherwise."""

    def observe(self, sighting: Sighting) -> Observed:
        """Once the resources have observed: its reads for the planner, by `Observation`
        field. A RunPod or Kubernetes error fails the tick's observation."""
        return Observed()

    def observed(self, report: TickReport, owners: Ownership) -> None:
        """Once the tick is observed (`report.observation`), dry runs too."""

    def before_apply(self, report: TickReport) -> None:
        """Before the plan is applied (never in a dry run): what the observation learnt
        that only the database keeps. Derived data: raising is the tick's error, never a
        reason to skip its actions."""

    def after_pods(self, report: TickReport, run: Callable[[Sequence[Action]], None]) -> None:
        """Once the pods' actions and the resources' phases have run; `run` carries out
        actions decided now, counted in the tick's report."""


def keep(report: TickReport, what: str, save: Callable[[], None]) -> None:
    """Save derived data: a failure is the tick's error, and the tick goes on (its
    terminations must run); the next read learns it again."""
    try:
        save()
    except Exception as exc:  # any store failure: the actions must still run
        report.errors.append(f"saving {what}: {exc}")
        log.error("could not save %s: %s", what, exc, exc_info=True)
