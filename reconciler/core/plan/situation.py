"""The inputs of one plan with the lookups every rule needs, and whose instances are ours."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from reconciler.core.actions import (
    Action,
    PodRef,
    SaveRow,
)
from reconciler.core.config import Settings
from reconciler.core.domain import (
    KubeObject,
)
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.money.namespace_caps import Spent
from reconciler.core.node.virtual_node import build_node
from reconciler.core.plan.observation import Observation
from reconciler.core.pods import ownership, podinfo
from reconciler.core.pods.ownership import Ownership


class Situation:
    """The inputs of one plan, with the lookups every rule needs."""

    def __init__(self, obs: Observation, settings: Settings, now: datetime) -> None:
        self.obs, self.settings, self.now = obs, settings, now
        self.node = obs.node or build_node(settings, now)
        self.lookalikes: dict[str, str] = {}
        """Pod UID → an untagged instance named like its own: no create while it stands."""
        self.registries_ensured: set[str] = set()
        """Names of registry credentials this plan already ensures before a create."""
        self.spent: Spent | None = None
        """What runs at list price, with the creates this plan admitted so far (counted
        once it is needed: `plan.hourly_costs`)."""

    def within(self, since: datetime | None, seconds: float) -> bool:
        return within(self.now, since, seconds)

    def new_row(self, pod: KubeObject, state: MappingState) -> MappingRow:
        ref = PodRef.of(pod)
        return MappingRow(ref.uid, ref.namespace, ref.name, state, self.now, self.now)

    def save(self, old: MappingRow | None, new: MappingRow) -> list[Action]:
        if old is not None and old.same_as(new):
            return []
        return [SaveRow(new.changed(updated_at=self.now))]


def within(now: datetime, since: datetime | None, seconds: float) -> bool:
    return since is not None and now - since < timedelta(seconds=seconds)


def ownership_of(obs: Observation, owner_id: str) -> Ownership:
    """Which of the observation's instances are ours: as the engine worked it out while
    observing, else (an observation built without it, or for another owner) now."""
    if obs.ownership is not None and obs.ownership.owner_id == owner_id:
        return obs.ownership
    pods = [p for p in obs.pods if podinfo.is_ours_to_run(p)]
    records = ownership.Records({i.id: i for i in obs.instances}, {m.id for m in obs.members})
    return Ownership.of(owner_id, obs.instances, obs.rows, pods, records)


def lookalikes_by_pod(
    found: Sequence[ownership.Lookalike], pods: Mapping[str, KubeObject]
) -> dict[str, str]:
    """Pod UID → the id of the look-alike named like its pod."""
    if not found:
        return {}
    by_name = {(PodRef.of(p).namespace, PodRef.of(p).name): uid for uid, p in pods.items()}
    return {by_name[(item.namespace, item.pod_name)]: item.instance_id for item in found}
