"""Spending caps per namespace, read from the Namespace object's annotations.

`runpod.io/max-hourly-spend` (USD/h, the list prices of the namespace's live instances)
and `runpod.io/max-instances` apply on top of the global `--max-hourly-spend` and
`--max-instances`. A value that does not parse holds every create of the namespace
back (with the reason on its pods) rather than letting it spend without a cap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

MAX_HOURLY_SPEND_ANNOTATION = "runpod.io/max-hourly-spend"
MAX_INSTANCES_ANNOTATION = "runpod.io/max-instances"


@dataclass(frozen=True)
class NamespaceCaps:
    namespace: str
    max_hourly_spend: float | None = None
    max_instances: int | None = None
    error: str | None = None
    """Why an annotation could not be read; creates in the namespace wait while it is set."""

    @property
    def empty(self) -> bool:
        return self.max_hourly_spend is None and self.max_instances is None and not self.error


def caps_from_annotations(namespace: str, annotations: Mapping[str, str]) -> NamespaceCaps:
    errors = []
    spend = annotations.get(MAX_HOURLY_SPEND_ANNOTATION)
    count = annotations.get(MAX_INSTANCES_ANNOTATION)
    max_spend = max_count = None
    if spend is not None:
        try:
            max_spend = float(spend)
            if not math.isfinite(max_spend) or max_spend < 0:
                raise ValueError
        except ValueError:
            max_spend = None
            errors.append(f'{MAX_HOURLY_SPEND_ANNOTATION}: "{spend}" is not a USD amount >= 0')
    if count is not None:
        try:
            max_count = int(count)
            if max_count < 0:
                raise ValueError
        except ValueError:
            max_count = None
            errors.append(f'{MAX_INSTANCES_ANNOTATION}: "{count}" is not a whole number >= 0')
    return NamespaceCaps(
        namespace,
        max_spend,
        max_count,
        f"namespace {namespace}: " + "; ".join(errors) if errors else None,
    )


@dataclass
class NamespaceUse:
    """What a namespace's live (or being created) instances add up to, at list price."""

    instances: int = 0
    hourly_spend: float = 0.0

    def refusal(self, caps: NamespaceCaps | None, extra_cost: float) -> str | None:
        """Why one more instance costing `extra_cost` would break the caps, else None."""
        if caps is None:
            return None
        if caps.error:
            return caps.error
        if caps.max_instances is not None and self.instances + 1 > caps.max_instances:
            return (
                f"namespace {caps.namespace}: {self.instances}/{caps.max_instances} "
                f"instances ({MAX_INSTANCES_ANNOTATION})"
            )
        if (
            caps.max_hourly_spend is not None
            and self.hourly_spend + extra_cost > caps.max_hourly_spend + 1e-9
        ):
            return (
                f"namespace {caps.namespace}: ${self.hourly_spend:.2f}/h of "
                f"${caps.max_hourly_spend:.2f}/h spent, this pod needs at least "
                f"${extra_cost:.2f}/h ({MAX_HOURLY_SPEND_ANNOTATION})"
            )
        return None
