"""Network volumes through the spend caps before their request (docs/architecture.md §3,
Money): a claim's volume create, or a resize, adds storage that bills every hour, so it
is admitted as a create of an instance is, against `--max-hourly-spend` and the claim's
namespace's `runpod.io/max-hourly-spend`, on top of what runs (`Spent`). One a cap
refuses is not sent; its claim is told which cap, once while the reason holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconciler.core.actions import (
    ClaimEvent,
    ClaimRef,
    CreateNetworkVolume,
    ResizeNetworkVolume,
)
from reconciler.core.money.hourly_cap import within_cap
from reconciler.core.money.namespace_caps import (
    MAX_HOURLY_SPEND_ANNOTATION,
    NamespaceCaps,
    Spent,
)
from reconciler.core.reasons import VolumeNotice
from reconciler.core.resources.storage_prices import hourly_usd


def admitted(
    actions: Iterable[Any],
    spent: Spent,
    max_hourly_spend: float,
    caps: Mapping[str, NamespaceCaps],
    resized: Callable[[ResizeNetworkVolume], tuple[int, str | None]],
) -> list[Any]:
    """The actions, each volume create or resize within both caps kept (and counted in
    `spent` for the next), each other one replaced by an Event on its claim saying which
    cap. `resized`: a resized volume's size (GB) and type before its resize."""
    kept: list[Any] = []
    for action in actions:
        if isinstance(action, CreateNetworkVolume):
            cost, notice = hourly_usd(action.size_gb, action.type), VolumeNotice.PROVISIONING_FAILED
        elif isinstance(action, ResizeNetworkVolume):
            size, kind = resized(action)
            cost = max(0.0, hourly_usd(action.size_gb, kind) - hourly_usd(size, kind))
            notice = VolumeNotice.RESIZE_FAILED
        else:
            kept.append(action)
            continue
        why = _refusal(
            spent, max_hourly_spend, caps.get(action.claim.namespace), action.claim, cost
        )
        if why is None:
            spent.add(action.claim.namespace, 0, cost)
            kept.append(action)
        else:
            kept.append(ClaimEvent(action.claim, notice, why, warning=True))
    return kept


def _refusal(
    spent: Spent,
    max_hourly_spend: float,
    caps: NamespaceCaps | None,
    claim: ClaimRef,
    cost: float,
) -> str | None:
    """Its namespace's cap is named first: the one its tenant can act on."""
    needs = f"this volume's storage needs ${cost:.4f}/h"
    if caps is not None and caps.error:
        return f"waiting for budget: {caps.error}"
    use = spent.use(claim.namespace)
    limit = caps.max_hourly_spend if caps is not None else None
    if limit is not None and not within_cap(use.hourly_spend + cost, limit):
        return (
            f"waiting for budget: namespace {claim.namespace}: ${use.hourly_spend:.2f}/h of "
            f"${limit:.2f}/h spent ({MAX_HOURLY_SPEND_ANNOTATION}), {needs}"
        )
    if not within_cap(spent.hourly_spend + cost, max_hourly_spend):
        return (
            f"waiting for budget: ${spent.hourly_spend:.2f}/h of ${max_hourly_spend:.2f}/h "
            f"spent (--max-hourly-spend), {needs}"
        )
    return None
