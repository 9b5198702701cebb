"""The mapping between one Kubernetes pod and its RunPod instance, as the planner sees it.

A plain value, `MappingRow`: the store turns database rows into it and back, so the pure core
never touches the database.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.core.domain import Instance, InstanceStatus
from reconciler.core.reasons import PodReason


class MappingState(enum.StrEnum):
    PENDING = "pending"
    """Waiting before any create: budget, capacity, or input the user must fix."""
    CREATING = "creating"
    """A create was decided and may be in flight or in doubt; no instance id yet."""
    RUNNING = "running"
    """An instance exists for the pod (in any RunPod status)."""
    TERMINATING = "terminating"
    """DELETE sent; waiting until the list no longer shows the instance."""
    TERMINATED = "terminated"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (MappingState.TERMINATED, MappingState.FAILED)


@dataclass(frozen=True, slots=True)
class MappingRow:
    # Slots: the store keeps the rows it read between ticks (`Store.load_rows`), and a
    # row without its own dict is a fifth of the size (10 000 rows: 20 MB less).
    pod_uid: str
    namespace: str
    name: str
    state: MappingState
    created_at: datetime
    updated_at: datetime
    instance_id: str | None = None
    instance_name: str | None = None
    attempt_id: str | None = None
    attempt_started_at: datetime | None = None
    gpu_type_id: str | None = None
    datacenter_id: str | None = None
    cost_per_hr: float | None = None
    last_instance_status: str | None = None
    status_hash: str | None = None
    mirror_key: str | None = None
    """Digest of what the status and annotations were last computed from (see `_mirror`)."""
    exit_code: int | None = None
    orphan_sightings: int = 0
    reason: PodReason | None = None
    last_error: str | None = None
    exited_at: datetime | None = None
    """When a batch instance was first seen stopped without a readable exit code."""
    ended_at: datetime | None = None
    """When the row became finished: the leak audit counts RunPod's charges after it."""
    start_failures: str | None = None
    """Where the pod's instances failed to start (`core.capacity.starts.tried_places`)."""

    def changed(self, **changes: object) -> MappingRow:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def running_on(self, instance: Instance) -> MappingRow:
        """The row of a pod whose instance exists: made by our create (the executor,
        once RunPod answered) or found by its tags (the planner's adoption). One
        builder for both, so the two never disagree on what a running row holds."""
        return self.changed(
            state=MappingState.RUNNING,
            instance_id=instance.id,
            instance_name=instance.name,
            attempt_id=None,
            gpu_type_id=instance.gpu_type_id or instance.cpu_flavor_id,
            datacenter_id=instance.datacenter_id,
            cost_per_hr=instance.cost_per_hr,
            last_instance_status=instance.status.value,
            reason=None,
            last_error=None,
            orphan_sightings=0,
        )

    def same_as(self, other: MappingRow) -> bool:
        """Equal but for the update time: nothing worth a database write."""
        return dataclasses.replace(self, updated_at=other.updated_at) == other


def unconfirmed_instances(
    rows: Iterable[MappingRow],
    owned: Mapping[str, Sequence[Instance]],
    lost_tags: Collection[str],
    live_pods: Collection[str],
) -> list[str]:
    """The instances a running row of a live pod maps that the list does not show as
    that pod's live instance (`owned`: ours by their owner and pod UID tags, by pod UID):
    omitted or TERMINATED, shown without our owner tag or with another pod's UID tag,
    shown without tags at all (`lost_tags`: their tags would be written back from what
    the list shows), or shown broken (ERROR: it fails the pod). Each is read by id before anything
    is concluded: the list lags behind creates, and one list is no proof (only RunPod's
    404 says an instance is gone, and only its record by id that its tags or its status
    changed so: docs/architecture.md §3, "Cloud resources"). A steady tick, whose list
    shows every mapped instance alive with its tags, reads none (and costs a lookup per
    row). So is the instance of a row replacing a failed start that the list omits: its
    pod gets another only once RunPod says the failed one is gone."""
    doubted = set()
    for row in rows:
        if replacing_start(row) and row.pod_uid in live_pods and row.instance_id:
            if all(shown.id != row.instance_id for shown in owned.get(row.pod_uid) or ()):
                doubted.add(row.instance_id)
            continue
        if row.state is not MappingState.RUNNING or row.pod_uid not in live_pods:
            continue
        instance_id = row.instance_id
        if not instance_id:
            continue
        for shown in owned.get(row.pod_uid) or ():
            if shown.id == instance_id and shown.status is not InstanceStatus.ERROR:
                break
        else:
            doubted.add(instance_id)
        if instance_id in lost_tags:
            doubted.add(instance_id)
    return sorted(doubted)


def replacing_start(row: MappingRow) -> bool:
    """Terminating an instance whose start failed, for a pod that stays to get another
    (`core.plan.starts`)."""
    return row.state is MappingState.TERMINATING and row.reason in (
        PodReason.INSTANCE_START_FAILED,
        PodReason.ERR_IMAGE_PULL,
    )
