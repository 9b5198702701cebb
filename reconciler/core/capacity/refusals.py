"""What each way RunPod can refuse a create means, in one table (docs/architecture.md §4,
"Candidates").

The executor names the kind from RunPod's answer and does what the table says; the
planner reads the same table to know which waiting reasons are retried once a minute
rather than every tick. Neither keeps a policy of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from reconciler.core.reasons import PodReason

# Definite refusals repeat until someone fixes something (the template, the key, the
# annotation): retry once a minute, not every tick, to spare the request quota.
REFUSAL_RETRY_SECONDS = 60

REFUSED_EVERYWHERE = (
    "RunPod lately refused creates for want of stock on every GPU type "
    "that fits this pod; trying again when the catalog shows stock"
)


class RefusalKind(Enum):
    """How RunPod said no to a create (or how we knew before asking)."""

    NO_STOCK = "no-stock"
    """400: no capacity for this GPU type there (the translation checks the rules a
    request could break, so a 400 is taken as stock)."""
    FORBIDDEN = "forbidden"
    """403: the key may not use this GPU type or pool."""
    NO_BALANCE = "no-balance"
    """402: the account cannot pay; no other candidate will do."""
    RATE_LIMITED = "rate-limited"
    """429, or the tick's deadline passed before the request was sent."""
    UNAUTHORIZED = "unauthorized"
    """401: the API key is missing, malformed or revoked."""
    INVALID_REQUEST = "invalid-request"
    """422: our request broke the contract (a reconciler bug)."""
    TEMPLATE_NOT_FOUND = "template-not-found"
    """404 on a create naming a template."""
    ID_NOT_FOUND = "id-not-found"
    """404 on a create naming no template: another id from the pod's annotations, or a
    registry credential the pod names that RunPod's list lacks."""
    OTHER = "other"
    """Any other definite 4xx."""


class Next(Enum):
    """What the executor does after a refusal."""

    TRY_NEXT = "try-next"
    """Try the pod's next candidate; when none is left the pod waits for capacity."""
    WAIT = "wait"
    """The pod waits (Pending, with the reason) for a later tick."""
    STOP_CREATES = "stop-creates"
    """The pod waits, and no other create starts this tick."""
    FAIL = "fail"
    """The pod fails: retrying cannot help."""


@dataclass(frozen=True)
class Refusal:
    reason: PodReason | None
    """What the pod shows while it waits or when it fails; None: nothing is wrong with
    the pod (it goes back to pending without a reason)."""
    next: Next
    message: str
    """What the pod and its Event say, formatted with `error` (RunPod's answer),
    `detail` (its detail, else the answer) and `template` (the template id named)."""
    retry_after: float | None = None
    """Seconds before the pod is tried again; None: every tick."""
    out_of_stock: bool = False
    """Remembered as no stock at that GPU type and cloud (`core.capacity.stock`), so this tick's
    later pods and the next ticks skip it for a while."""


_NOT_ACCEPTED = "{detail}"  # gathered with the other candidates' answers

REFUSALS: dict[RefusalKind, Refusal] = {
    RefusalKind.NO_STOCK: Refusal(
        PodReason.CAPACITY_UNAVAILABLE, Next.TRY_NEXT, _NOT_ACCEPTED, out_of_stock=True
    ),
    RefusalKind.FORBIDDEN: Refusal(PodReason.CAPACITY_UNAVAILABLE, Next.TRY_NEXT, _NOT_ACCEPTED),
    RefusalKind.NO_BALANCE: Refusal(PodReason.INSUFFICIENT_BALANCE, Next.STOP_CREATES, "{error}"),
    RefusalKind.RATE_LIMITED: Refusal(None, Next.STOP_CREATES, "{error}"),
    RefusalKind.UNAUTHORIZED: Refusal(
        PodReason.RUNPOD_UNAUTHORIZED,
        Next.STOP_CREATES,
        "RunPod refused the API key: {detail}",
        REFUSAL_RETRY_SECONDS,
    ),
    RefusalKind.INVALID_REQUEST: Refusal(
        PodReason.INVALID_RUNPOD_REQUEST,
        Next.FAIL,
        "RunPod refused the request as invalid (a reconciler bug, not retried): {detail}",
    ),
    RefusalKind.TEMPLATE_NOT_FOUND: Refusal(
        PodReason.TEMPLATE_NOT_FOUND,
        Next.WAIT,
        "RunPod has no template {template!r} this account may use: {detail}",
        REFUSAL_RETRY_SECONDS,
    ),
    RefusalKind.ID_NOT_FOUND: Refusal(
        PodReason.INVALID_ANNOTATION,
        Next.WAIT,
        "RunPod does not know an id this pod names: {detail}",
        REFUSAL_RETRY_SECONDS,
    ),
    RefusalKind.OTHER: Refusal(
        PodReason.RUNPOD_REFUSED,
        Next.WAIT,
        "RunPod refused the create: {error}",
        REFUSAL_RETRY_SECONDS,
    ),
}

_RETRY_AFTER: dict[PodReason, float] = {
    refusal.reason: refusal.retry_after
    for refusal in REFUSALS.values()
    if refusal.reason is not None and refusal.retry_after is not None
}


IMAGE_PULL_RETRY_SECONDS = 300
"""An image RunPod could not pull is tried again after five minutes, the kubelet's
image pull back-off at its longest."""
_RETRY_AFTER[PodReason.ERR_IMAGE_PULL] = IMAGE_PULL_RETRY_SECONDS


def retry_after(reason: PodReason | None) -> float | None:
    """Seconds a pod waiting for `reason` waits between tries; None: every tick."""
    return _RETRY_AFTER.get(reason) if reason is not None else None


class GangRefusal(Enum):
    """Why a Job whose pods ask for a cluster (`runpod.io/cluster`) cannot be one."""

    NOT_A_JOB = "not-a-job"
    NOT_INDEXED = "not-indexed"
    UNEQUAL_PARALLELISM = "unequal-parallelism"
    SIZE = "size"
    PODS_DIFFER = "pods-differ"
    NOT_GPU = "not-gpu"
    REGISTRY = "registry"
    TEMPLATE = "template"


GANG_REFUSALS: dict[GangRefusal, str] = {
    GangRefusal.NOT_A_JOB: "only the pods of an Indexed Job run as an Instant Cluster",
    GangRefusal.NOT_INDEXED: (
        "Job {job} asks for an Instant Cluster but is not Indexed (completionMode: Indexed)"
    ),
    GangRefusal.UNEQUAL_PARALLELISM: (
        "Job {job} asks for an Instant Cluster: its parallelism ({parallelism}) must equal "
        "its completions ({completions}), so that all its pods run at once"
    ),
    GangRefusal.SIZE: (
        "Job {job} asks for an Instant Cluster of {completions} pods: RunPod makes them of 2 to 250"
    ),
    GangRefusal.PODS_DIFFER: (
        "Job {job} asks for an Instant Cluster, but its pods differ (an Instant Cluster's "
        "pods are identical): {detail}"
    ),
    GangRefusal.NOT_GPU: "Job {job} asks for an Instant Cluster, which has GPU pods only",
    GangRefusal.REGISTRY: (
        "Job {job} asks for an Instant Cluster, which RunPod cannot pull private images for"
    ),
    GangRefusal.TEMPLATE: "Job {job} asks for an Instant Cluster, which takes no RunPod template",
}
"""What the gang's pods say while they wait (`PodReason.INVALID_CLUSTER_JOB`), formatted
with the Job's name and figures. A Job can be edited, so they wait, and fail with the
reason at max_pending_time like any pod that cannot start."""
