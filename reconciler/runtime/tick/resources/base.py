"""What every cloud resource plugs into the tick with (docs/architecture.md §3, "Cloud
resources"): the runtime half of one resource, whose pure half is its module in
`core/resources/`.

A resource gives the executor its `Steps` for each run (the actions it carries out,
through the run's one `RunContext`), and the engine its reads (`observe`), its own
plan (`plan`), its part of the report (`planned`), its phase after the pods' actions
(collection, provisioning: `after_pods`), the hourly price of what it keeps that the
pod list does not show (`standing_spend`, counted in the spend caps) and how RunPod
bills it (`billing`). The engine and the executor loop over the registered resources
(`runtime/tick/resources/__init__.py`, where the whole recipe is) in order and know
none of them by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.store.repository import Store
from reconciler.core.actions import Action
from reconciler.core.capacity.stock import StockMemory
from reconciler.core.config import Settings
from reconciler.core.domain import CpuFlavor, GpuType, Instance, KubeObject
from reconciler.core.plan.observation import CreateInputs, Observation, Observed
from reconciler.runtime.logs.sources import PodLogs
from reconciler.runtime.tick.catalog import CatalogCache
from reconciler.runtime.tick.money import billing
from reconciler.runtime.tick.run_context import RunContext
from reconciler.runtime.tick.tick_report import TickReport


@dataclass(frozen=True)
class Shared:
    """What the engine shares with every resource: the clients, the store, the cached
    catalogs and stock, the pods' logs, who owns what."""

    settings: Settings
    runpod: RunPodClient
    kube: KubeClient
    store: Store
    stock: StockMemory
    catalog: CatalogCache[GpuType]
    cpu_catalog: CatalogCache[CpuFlavor]
    pod_logs: PodLogs
    attributions: billing.Attributions


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


class Deferred(Exception):  # a signal, not an error
    """Raised by a step whose action waits for a later tick with nothing done: the
    action is neither applied nor failed (a create past the deadline, a delete whose end
    is not on its pods yet)."""


class StepRefused(Exception):
    """An expected failure of a step (logged without a traceback)."""


class AlreadyTold(StepRefused):
    """A failure its step has told once already (a DELETE that keeps failing): the
    executor counts it failed but does not log it again on every tick."""


@dataclass
class Sighting:
    """What a tick's observation gathers, in order: the one RunPod list and the node's
    pods, then each resource's own reads (`Resource.observe`). The engine turns it into
    the planner's `Observation`."""

    now: datetime
    listed: Sequence[Instance]
    """The tick's one pod list, cluster members included."""
    pods: Sequence[KubeObject]
    """The node's pods that run one by one."""
    gang_pods: Sequence[KubeObject]
    """The node's pods that run as a gang (an Instant Cluster)."""
    create_inputs: Callable[[Sequence[KubeObject]], dict[str, CreateInputs]]
    """Reads what each pod's create needs from Kubernetes (shared by every resource)."""
    catalogs: Callable[[bool, bool], tuple[list[GpuType], list[CpuFlavor]]]
    """The GPU and CPU catalogs, each read (cached) only when asked for."""
    found: Observed = field(default_factory=lambda: Observed())
    """The planner's `Observation` fields each resource read, typed."""
    slots: dict[type[Any], Any] = field(default_factory=dict)
    """What a plug-in resource read for its own plan, by the type it read it as
    (`Observation.slot`)."""
    creating: list[KubeObject] = field(default_factory=list)
    """Pods about to be created: their namespaces' caps are read, and the spend of what
    the resources keep."""
    wants_gpus: bool = False
    """A create of this tick needs the GPU catalog."""
    wants_node: bool = False
    """A pod may start: the Node's cordon and taints are read."""
    billing: billing.BillingRead = field(default_factory=billing.BillingRead)


@dataclass(frozen=True)
class AfterPods:
    """What a resource's phase after the pods' actions is handed."""

    report: TickReport
    run: Callable[[Sequence[Action]], None]
    """Carry out actions decided now, journaled, counted in the tick's report."""
    context: RunContext
    """The run's context: `context.steps_of` gives this run's steps of a resource."""

    def steps_of(self, kind: type[StepsType]) -> StepsType:
        return self.context.steps_of(kind)


class Resource(Protocol):
    """One cloud resource, registered once (`runtime/tick/resources/__init__.py`)."""

    def steps(self, context: RunContext) -> Steps:
        """Its steps for one run of the executor."""

    def observe(self, sighting: Sighting) -> None:
        """Its reads for the planner, in the tick's observation (nothing when none)."""

    def planned(self, report: TickReport) -> None:
        """Once the tick is planned, dry runs too: what its reads tell the report."""

    def after_pods(self, tick: AfterPods) -> None:
        """Its phase once the tick's plan has run (nothing when it has none)."""

    def plan(self, observation: Observation, now: datetime) -> Sequence[Action]:
        """Its own actions, decided on the tick's observation (its `Observation.slot`)
        after the planner's and run with them; dry runs plan too. The built-in resources
        return none: the planner plans theirs (`core/planner.py`)."""

    def standing_spend(self, now: datetime) -> Mapping[str | None, float]:
        """USD per hour, by namespace (None: no namespace's), of what it keeps that the
        pod list does not show, for the spend caps of a tick that may create."""

    def billing(self) -> billing.BillingRoute | None:
        """How RunPod bills it apart from instances (None: it is not billed so): read
        hourly while a resource of its kind is known as ours, kept in the billing tables
        under its kind (`runtime/tick/money/billing.py`)."""
