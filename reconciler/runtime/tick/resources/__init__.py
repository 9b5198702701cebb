"""The cloud resources the tick runs, each a plug-in (`base.Resource`): the engine and the
executor loop over this list and know none of them by name.

The order is the tick's: gangs observe first (a forming gang needs the GPU catalog,
which the instances' reads fetch once for both); after the pods' actions, a create
refused for want of stock marks the catalogs stale before the provisioner reads them,
credentials are collected, then the network-volume provisioner runs.

The recipe for a new cloud resource, every step (tests/integration/test_toy_resource.py
registers a toy billed resource from its own module and checks each):

1. RunPod's calls for it: a module of `adapters/runpod/` on the shared transport, and
   the simulator's routes (`reconciler/sim/`) the sandbox tests run against.
2. Its pure half: a module of `core/resources/` (its mark, what is ours, its plan or
   collection rule, its leaks), added to the `resources-apart` contract
   (pyproject.toml).
3. Its actions: frozen dataclasses of its own, each with `shown()` (what `--dry-run`
   lists of it), which is all `core/actions.py`'s `Action` protocol asks: nothing is
   added there (`BuiltinAction` is the union of the built-in kinds' actions).
4. Its runtime half: one module here implementing `base.Resource`, added to the
   `resource-plugins-apart` contract:
   - `steps(context)`: its `Steps`, whose `actions` the executor routes to it; each
     call that changes something through `context.journaled(kind, ..., durable_at=,
     made=)`, `made` saying which id of a create's answer it made (the journal row
     keeps it);
   - `observe(sighting)`: its reads, into its own typed slot (`sighting.slots[T]`,
     read back as `Observation.slot(T)`; the built-in four fill `Observed`'s fields);
   - `plan(observation, now)`: its own actions (the built-in four return none: the
     planner plans theirs);
   - `planned(report)`: its section of the tick's report (`report.sections[T]`, whose
     `line()` the loop's tick line shows; the built-in ones' are in `sections.py`);
   - `after_pods(tick)`: its phase after the pods' actions, if it has one;
   - `standing_spend(now)`: what it keeps costs per hour by namespace, for the caps
     (summed into `Observation.standing_spend`);
   - `billing()`: its `BillingRoute` if RunPod bills it apart from instances (read
     hourly while a resource of its kind is ours: write whose each one is with
     `Shared.attributions`, kept in the billing tables under its kind, shown by
     `reconciler cost` under its kind); its `creates` name the actions that make
     something billed by the hour (the ghost-charge audit waits for a tick that plans
     none), its `audit` how the hourly ghost-charge audit checks an id of it charged
     (the ids RunPod lists now, a read by one id); without it its charges are not
     audited.
5. One line in `registered()` below, in the tick's order.
6. Its crash points: a name in `runtime/tick/crashpoints.py` for each `durable_at`,
   and its calls in the chaos campaign's workload (tests/chaos/).
7. What only the built-in kinds have so far, to extend by hand if it needs them: a
   metric of its own in `runtime/process/metrics.py`, read from its section (its
   actions are counted by kind, and a ghost charge of it in `reconciler_charged_gone_*`,
   anyway; the metrics read the built-in resources' sections by type), and the
   Kubernetes objects that name one of its ids (`core/money/ghost_charges.py`'s
   `names`, which tells a ghost charge's pod or PV).
"""

from __future__ import annotations

from reconciler.runtime.tick.resources.base import Resource, Shared

__all__ = ["Resource", "Shared", "registered"]
from reconciler.runtime.tick.resources.clusters import Clusters
from reconciler.runtime.tick.resources.instances import Instances
from reconciler.runtime.tick.resources.registries import Registries
from reconciler.runtime.tick.resources.volumes import Volumes


def registered(shared: Shared) -> list[Resource]:
    return [Clusters(shared), Instances(shared), Registries(shared), Volumes(shared)]
