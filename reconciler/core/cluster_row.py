"""The database's memory of one gang's Instant Cluster (`core.resources.clusters` says
which pods are a gang): a plain value, which the store turns into rows and back."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from datetime import datetime

from reconciler.core.reasons import PodReason


class ClusterState(enum.StrEnum):
    CREATING = "creating"
    """The create was decided and may be in flight or in doubt; no cluster id yet."""
    REFUSED = "refused"
    """RunPod refused the create definitely; the gang waits, tried again later."""
    RUNNING = "running"
    """The cluster exists (its id known)."""
    DELETING = "deleting"
    """DELETE decided; done once RunPod answers 404 for the cluster by id."""
    GONE = "gone"
    """RunPod answered 404 for the cluster by id: nothing bills. The row stays only for
    the gang's end (its pods and a later attempt of the Job read it) while a pod of its
    Job is on the node; `state show` and the caps no longer count it."""


@dataclass(frozen=True)
class ClusterRow:
    """The database's memory of one gang's cluster: the create intent before the call
    (architecture §4's create protocol, for a cluster), then the cluster's id."""

    gang: str
    job_uid: str
    namespace: str
    job_name: str
    state: ClusterState
    attempt_started_at: datetime
    updated_at: datetime
    cluster_id: str | None = None
    gpu_type_id: str | None = None
    pod_count: int = 0
    cost_per_hr: float | None = None
    reason: PodReason | None = None
    """Why the last create was refused (state refused), or why the gang failed (state
    deleting: its end, recorded before the DELETE)."""
    message: str | None = None
    exit_code: int | None = None
    """Rank 0's exit code, the gang's result, recorded before the DELETE (state deleting)."""
    result_checked_at: datetime | None = None
    """When rank 0's log was last read for its exit-code marker (`core.plan.gang_end`)."""
    delete_answered_at: datetime | None = None
    """When RunPod last answered our DELETE of the cluster: it is not asked again for a
    while after, as the list may still show the members. A DELETE decided but never
    answered (a crash, an error) is asked again at once."""
    unread_ends: int = 0
    """How many times rank 0's one last read failed while the gang was about to end: the
    gang waits for a read that answers, at most `gang_end.LAST_READ_TRIES` of them."""

    @property
    def ended(self) -> bool:
        """The gang's end was decided and recorded: its pods are owed that end."""
        deciding = self.exit_code is not None or self.reason is not None
        return self.state in (ClusterState.DELETING, ClusterState.GONE) and deciding

    def changed(self, **changes: object) -> ClusterRow:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
