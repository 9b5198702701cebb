"""Which pods get an instance this tick: a create prepared per waiting pod, admitted
oldest first against the instance, spend and rate budgets and each namespace's caps
(docs/architecture.md §2, Plan).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from reconciler.core.actions import (
    Action,
    Create,
    EnsureRegistryAuth,
    PodRef,
)
from reconciler.core.capacity import refusals
from reconciler.core.capacity import starts as starts_of
from reconciler.core.capacity.refusals import REFUSED_EVERYWHERE
from reconciler.core.capacity.stock import usable
from reconciler.core.config import Settings
from reconciler.core.domain import (
    CreateRequest,
    KubeObject,
)
from reconciler.core.mapping import MappingRow, MappingState, replacing_start
from reconciler.core.money.hourly_cap import within_cap
from reconciler.core.node import placement
from reconciler.core.plan import hourly_costs, starts
from reconciler.core.plan.observation import CreateInputs, Observation
from reconciler.core.plan.outcomes import (
    cannot_create,
    fail_pod,
    gave_up,
    show_waiting,
    waited_too_long,
)
from reconciler.core.plan.situation import Situation, within
from reconciler.core.pods import past as pod_past
from reconciler.core.pods import podinfo
from reconciler.core.pods.ownership import Ownership
from reconciler.core.reasons import PodReason
from reconciler.core.resources import registries, storage_prices, volume_objects
from reconciler.core.translate.annotations import MAX_PRICE, NETWORK_VOLUME_ID, read_id, read_price
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.request import create_requests, requests_out_of_stock


@dataclass(frozen=True)
class Waiting:
    """A pod that should get an instance, pending admission against the budgets."""

    pod: KubeObject
    row: MappingRow | None
    candidates: tuple[CreateRequest, ...]
    pull_secret: tuple[str, str, str] | None
    own_registry_names: frozenset[str] = frozenset()
    """Our credentials' names for the pod's own pull secrets (`Create.own_registry_names`)."""


def needs_create_inputs(
    pod: KubeObject,
    row: MappingRow | None,
    owners: Ownership,
    settings: Settings,
    now: datetime,
) -> bool:
    """Whether the engine should fetch this pod's Job, Secrets and ConfigMaps this tick."""
    if podinfo.uid(pod) in owners.owned or podinfo.is_deleting(pod) or podinfo.is_finished(pod):
        return False
    if row is None:
        return not pod_past.has_past(pod, owners)
    if row.state is MappingState.PENDING or replacing_start(row):
        return True
    return row.state is MappingState.CREATING and not within(
        now, row.attempt_started_at, settings.timing.create_grace_time
    )


def prepare_create(
    tick: Situation, pod: KubeObject, row: MappingRow | None
) -> tuple[list[Action], Waiting | None]:
    inputs = tick.obs.create_inputs.get(podinfo.uid(pod))
    if inputs is None or not (tick.obs.catalog or tick.obs.cpu_catalog):
        return [], None  # the engine could not gather what a create needs this tick
    foreign = _foreign_ids(tick, pod, inputs)
    if foreign is not None:
        return cannot_create(tick, pod, row, PodReason.FOREIGN_ID, foreign, False), None
    try:
        if inputs.error is not None:
            raise inputs.error
        requests = create_requests(
            pod,
            inputs.job,
            inputs.sources,
            tick.obs.catalog,
            tick.settings,
            tick.settings.owner_id,
            inputs.registry_auth_id,
            tick.obs.cpu_catalog,
            tick.obs.network_volumes,
            inputs.claim,
        )
        candidates = priced(pod, inputs.job, tick.settings, requests)
    except TranslationError as error:
        return cannot_create(tick, pod, row, error.reason, error.message, error.permanent), None
    if requests_out_of_stock(candidates, tick.obs.catalog, tick.obs.cpu_catalog):
        return cannot_create(
            tick,
            pod,
            row,
            PodReason.CAPACITY_UNAVAILABLE,
            "every GPU type that fits this pod is out of stock",
            False,
        ), None
    if row is not None and row.start_failures:
        candidates = starts.elsewhere(candidates, row.start_failures, tick.obs.catalog)
        if not candidates:
            tried = ", ".join(starts_of.tried_places(row.start_failures))
            return fail_pod(
                tick,
                pod,
                row,
                None,
                PodReason.INSTANCE_START_FAILED,
                f"its instances failed to start in every place that fits it ({tried})",
            ), None
    candidates = usable(candidates, tick.obs.refused)
    if not candidates:
        return cannot_create(
            tick, pod, row, PodReason.CAPACITY_UNAVAILABLE, REFUSED_EVERYWHERE, False
        ), None
    actions: list[Action] = []
    if row is not None and row.reason:
        # The last attempt failed (no capacity, budget): retry, still showing why. A
        # replaced start is bounded by its tries, not by --max-pending-time.
        if row.reason is not PodReason.INSTANCE_START_FAILED and waited_too_long(tick, pod):
            return fail_pod(tick, pod, row, None, row.reason, gave_up(tick, row.last_error)), None
        actions, row = show_waiting(tick, pod, row, row.reason, row.last_error or row.reason)
        pause = refusals.retry_after(row.reason)
        if pause is not None and tick.within(row.updated_at, pause):
            return actions, None
    own = frozenset(
        registries.registry_name(tick.settings.owner_id, *login)
        for login in inputs.pull_credentials
        if candidates[0].registry_auth_id  # only a pod naming a credential needs them
    )
    return actions, Waiting(pod, row, tuple(candidates), inputs.pull_secret, own)


def priced(
    pod: KubeObject, job: KubeObject | None, settings: Settings, requests: list[CreateRequest]
) -> list[CreateRequest]:
    """The requests priced with their disks (`storage_prices`), those within the pod's
    max price (its runpod.io/max-price, else --max-gpu-price) only: every dollar an
    instance costs is counted before its create, in its max price and in the caps."""
    price = read_price(pod, job, MAX_PRICE)
    limit = settings.caps.max_gpu_price if price is None else price
    kept, over = storage_prices.within_max_price(requests, limit)
    if over is None:
        return kept
    cpu = bool(requests and requests[0].cpu_flavor_id)
    reason = PodReason.UNSATISFIABLE_CPU_REQUEST if cpu else PodReason.UNSATISFIABLE_GPU_REQUEST
    raise TranslationError(reason, over, permanent=True)


def _foreign_ids(tick: Situation, pod: KubeObject, inputs: CreateInputs) -> str | None:
    """Why an id the pod (or its Job) writes may not be used: each names only what its
    namespace owns (`core.tenancy`), by RunPod's record in the tick's lists."""
    volume_id = read_id(pod, inputs.job, NETWORK_VOLUME_ID)
    if volume_id is not None and tick.obs.network_volumes is not None:
        why = volume_objects.named_volume_refusal(
            volume_id, tick.obs.network_volumes, tick.settings.owner_id, inputs.claim_uids
        )
        if why is not None:
            return (
                f"annotation {NETWORK_VOLUME_ID}: {why}; a pod mounts another volume only "
                "through a PersistentVolume an administrator makes"
            )
    return None


def admit(tick: Situation, waiting: list[Waiting]) -> list[Action]:
    """Oldest pods first, within the global caps, their namespace's caps and the rate
    budget (what runs counted by `plan.hourly_costs`: instances, clusters, storage)."""
    if not waiting:
        return []  # the steady tick: spare counting what every namespace spends
    total = hourly_costs.spent(tick)
    slots = create_slots(tick.obs, tick.settings)
    actions: list[Action] = []
    for wait in sorted(waiting, key=lambda w: podinfo.oldest_first(w.pod)):
        closed = placement.closed_to(wait.pod, tick.node)
        if closed is not None:
            cordoned = bool((tick.node.get("spec") or {}).get("unschedulable"))
            actions += cannot_create(
                tick,
                wait.pod,
                wait.row,
                PodReason.NODE_CORDONED if cordoned else PodReason.NODE_TAINTED,
                f"no new instance: {closed}",
                False,
            )
            continue
        namespace = PodRef.of(wait.pod).namespace
        ns_use = total.use(namespace)
        caps = tick.obs.namespace_caps.get(namespace)
        # Only candidates within both caps are tried: RunPod may accept any of them.
        affordable = tuple(
            c
            for c in wait.candidates
            if within_cap(total.hourly_spend + c.hourly_price, tick.settings.caps.max_hourly_spend)
            and ns_use.refusal(caps, c.hourly_price) is None
        )
        cheapest = min(c.hourly_price for c in wait.candidates)
        refusal = ns_use.refusal(caps, cheapest)
        if total.instances + 1 > tick.settings.caps.max_instances or (
            refusal is None and not affordable
        ):
            actions += cannot_create(
                tick,
                wait.pod,
                wait.row,
                PodReason.BUDGET_EXCEEDED,
                _budget_message(tick, total.instances, total.hourly_spend, cheapest),
                False,
            )
        elif refusal is not None:
            actions += cannot_create(
                tick,
                wait.pod,
                wait.row,
                PodReason.BUDGET_EXCEEDED,
                f"waiting for budget: {refusal}",
                False,
            )
        elif slots > 0:
            actions += _create(tick, wait, affordable)
            # Count the dearest candidate tried: RunPod may accept any of them.
            total.add(namespace, 1, max(c.hourly_price for c in affordable))
            slots -= 1
    return actions


def create_slots(obs: Observation, settings: Settings) -> int:
    """Creates one tick may plan: the cap, and the rate budget (our share of it) less a
    few requests kept for terminates and the next list."""
    budget = obs.rate_budget
    rate_slots = settings.caps.max_creates_per_tick if budget is None else max(0, budget - 3)
    return min(settings.caps.max_creates_per_tick, rate_slots)


def _budget_message(tick: Situation, count: int, spend: float, cost: float) -> str:
    return (
        f"waiting for budget: {count}/{tick.settings.caps.max_instances} instances, "
        f"${spend:.2f}/h of ${tick.settings.caps.max_hourly_spend:.2f}/h spent, "
        f"this pod needs at least ${cost:.2f}/h"
    )


def _create(tick: Situation, wait: Waiting, candidates: tuple[CreateRequest, ...]) -> list[Action]:
    ref = PodRef.of(wait.pod)
    base = wait.row or tick.new_row(wait.pod, MappingState.CREATING)
    attempt = hashlib.sha256(f"{ref.uid}/{tick.now.isoformat()}".encode()).hexdigest()[:16]
    # The previous reason stays on the intent row, so that the executor raises an
    # Event only when a failed create fails for a new reason.
    intent = base.changed(
        state=MappingState.CREATING,
        attempt_id=attempt,
        attempt_started_at=tick.now,
        instance_name=candidates[0].name,
        updated_at=tick.now,
    )
    if wait.pull_secret is None:
        return [Create(ref, intent, candidates, own_registry_names=wait.own_registry_names)]
    registry, username, password = wait.pull_secret
    name = registries.registry_name(tick.settings.owner_id, registry, username, password)
    ensure: list[Action] = []
    if name not in tick.registries_ensured:
        tick.registries_ensured.add(name)
        ensure.append(EnsureRegistryAuth(name, username, password, ref))
    return [*ensure, Create(ref, intent, candidates, registry_name=name)]
