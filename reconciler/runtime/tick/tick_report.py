"""What one tick saw and did: its report, read by the loop's metrics, `sync --once`
and the tests."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from reconciler.core.actions import Action
from reconciler.core.money.ghost_charges import GhostCharge
from reconciler.core.plan.observation import Observation
from reconciler.core.pods import ownership
from reconciler.core.pods.usage import GpuUtilization
from reconciler.runtime.tick.money.billing import BillingRead, ResourceBillingRead


class Section(Protocol):
    """A plug-in resource's part of the tick's report (`TickReport.sections`)."""

    def line(self) -> str | None:
        """What the tick's log line adds for it (None: nothing worth a word)."""


SectionType = TypeVar("SectionType")


@dataclass
class TickReport:
    started_at: datetime
    finished_at: datetime | None = None
    tick_id: int | None = None
    observed: bool = False
    pods: int = 0
    instances: int = 0
    planned: Counter[str] = field(default_factory=Counter)
    applied: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    done: list[Action] = field(default_factory=list)
    """The actions that were carried out without an error."""
    observation: Observation | None = None
    """What the tick saw, for the metrics; None when it could not observe."""
    gpus: list[GpuUtilization] = field(default_factory=list)
    """Each running GPU's utilization as the tick's list showed it, worked out once for
    the tick's row and the gauge (not on a dry run)."""
    lookalikes: list[ownership.Lookalike] = field(default_factory=list)
    """Untagged instances nothing names, named like ours: reported, never touched."""
    billing: BillingRead = field(default_factory=BillingRead)
    resource_billing: list[ResourceBillingRead] = field(default_factory=list)
    """Network volumes' and clusters' charges read this tick (at most hourly)."""
    ghost_charges: list[GhostCharge] | None = None
    """Ids RunPod charges that it neither lists nor answers for (`core.money.ghost_charges`);
    None when the tick did not get to apply."""
    skipped: str | None = None
    """Why the tick did nothing although nothing is wrong (RunPod's rate limit)."""
    deferred_creates: int = 0
    """Planned creates the executor left for a later tick (quota share spent, stopped)."""

    sections: dict[type[Any], Section] = field(default_factory=dict)
    """Each resource's own part of the report, by its type (`section`): a plug-in's, and
    the built-in ones' (`runtime/tick/resources/sections.py`)."""

    def section(self, kind: type[SectionType]) -> SectionType | None:
        found = self.sections.get(kind)
        return found if isinstance(found, kind) else None

    def section_lines(self) -> list[str]:
        """The resources' words for the tick's log line."""
        return [line for part in self.sections.values() if (line := part.line())]

    @property
    def duration(self) -> float:
        end = self.finished_at or self.started_at
        return (end - self.started_at).total_seconds()

    @property
    def ok(self) -> bool:
        return self.observed or self.skipped is not None
