"""A start that does not finish: the instance is terminated and the pod placed again
(docs/architecture.md §4, "Starts that do not finish"; what counts as such a start is
`core.capacity.starts`).

Each replacement follows the shared terminate path: the pod's new reason and the place
that failed are written on the pod (Pending, `InstanceStartFailed`, its `runpod.io/pod-id`
removed) and on its row (`terminating`, the place added to `start_failures`) before the
DELETE, which waits for that patch; the row goes back to waiting only once the instance
is gone from RunPod's list, and the next create leaves out every place the pod failed in.
After `starts.MAX_TRIES` places the pod fails, its reason saying what was tried. An image
that cannot be pulled is not tried elsewhere: the instance goes, the pod waits
(`ErrImagePull`) and tries again every `refusals.IMAGE_PULL_RETRY_SECONDS`, as a kubelet
backs off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from reconciler.core.actions import Action, Event, PatchStatus, PodRef, Terminate
from reconciler.core.capacity import starts
from reconciler.core.capacity.starts import FailedStart, StartFailure
from reconciler.core.domain import CreateRequest, GpuType, Instance, KubeObject
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.plan.outcomes import fail_pod
from reconciler.core.plan.situation import Situation
from reconciler.core.pods import past as pod_past
from reconciler.core.reasons import PodReason, TerminateReason
from reconciler.core.translate import status as pod_status
from reconciler.core.translate.annotations import WRITTEN_ANNOTATIONS


def judged(tick: Situation, pod: KubeObject, instance: Instance) -> FailedStart | None:
    """How the instance's start failed, if it did: RunPod's lines said so, or it is
    still starting `--start-timeout` after its create. Only a start that never ran is
    judged: an instance RunPod says started (`startedAt`), or whose pod showed it
    running, may lose its runtime for a moment and is never replaced for it."""
    if not starts.is_starting(instance) or instance.started_at is not None:
        return None
    if pod_past.ran_before(pod):
        return None
    seen = tick.obs.start_failures.get(instance.id)
    if seen is not None:
        return seen
    timeout = tick.settings.timing.start_timeout
    if starts.timed_out(instance, tick.obs.runpod_now, timeout):
        return FailedStart(StartFailure.TIMEOUT, f"not running {timeout:g} s after its create")
    return None


def replace_start(
    tick: Situation, pod: KubeObject, row: MappingRow, instance: Instance, seen: FailedStart
) -> list[Action]:
    place = starts.place_of(instance)
    what = f"RunPod instance {instance.id} did not start on {place}: {seen.failure.value}"
    # A failure that any host would meet says nothing against this one: not counted.
    tried = row.start_failures
    if not seen.failure.on_any_host:
        tried = starts.with_place(tried, place)
    count = len(starts.tried_places(tried))
    if seen.failure.on_any_host:
        reason, message = PodReason.ERR_IMAGE_PULL, f"{what} ({seen.line[:300]})"
    elif count >= starts.MAX_TRIES:
        return fail_pod(
            tick,
            pod,
            row.changed(start_failures=tried),
            instance,
            PodReason.INSTANCE_START_FAILED,
            f"{what}; gave up after {count} places: {', '.join(starts.tried_places(tried))}",
        )
    else:
        reason = PodReason.INSTANCE_START_FAILED
        message = f"{what}; placing the pod again (try {count + 1} of {starts.MAX_TRIES})"
    ref = PodRef.of(pod)
    status = pod_status.pod_status(
        pod, None, exit_code=None, now=tick.now, reason=reason, message=message, pending=True
    )
    ending = row.changed(
        state=MappingState.TERMINATING,
        reason=reason,
        last_error=message,
        start_failures=tried,
        status_hash=pod_status.status_fingerprint(status),
    )
    # The failed instance's id leaves the pod with its status: a writer that lost our
    # rows must not rebuild a row for it, nor take the pod for one that ran.
    forget = dict.fromkeys(sorted(WRITTEN_ANNOTATIONS))
    return [
        PatchStatus(ref, status, ending, annotations=forget),
        Event(ref, reason, message, warning=True),
        Terminate(instance.id, TerminateReason.START_FAILED, message, ref, ending),
    ]


def waiting_again(row: MappingRow) -> MappingRow:
    """The row of a pod whose failed instance is gone: waiting for its next create. Its
    update time stays the terminate's, from which an image pull's back-off counts."""
    return row.changed(
        state=MappingState.PENDING,
        instance_id=None,
        attempt_id=None,
        attempt_started_at=None,
        last_instance_status=None,
        mirror_key=None,
        ended_at=None,
    )


def elsewhere(
    candidates: Sequence[CreateRequest], tried: str | None, catalog: Sequence[GpuType]
) -> list[CreateRequest]:
    """The candidates without the places the pod's instances failed to start in: a
    candidate for anywhere is narrowed to its type's other data centers in the catalog."""
    failed = set(starts.tried_places(tried))
    if not failed:
        return list(candidates)
    where = {gpu.id: tuple(dc.id for dc in gpu.datacenters) for gpu in catalog}
    kept = []
    for candidate in candidates:
        offer = candidate.offer_id
        places = candidate.datacenter_ids or where.get(offer, ())
        if not places:
            if f"{offer}@?" not in failed and not any(p.startswith(f"{offer}@") for p in failed):
                kept.append(candidate)
            continue
        left = tuple(dc for dc in places if f"{offer}@{dc}" not in failed)
        if left:
            kept.append(replace(candidate, datacenter_ids=left))
    return kept
