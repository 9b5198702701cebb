"""Spending caps per namespace, read from the Namespace object's annotations.

`runpod.io/max-hourly-spend` (USD/h, the list prices of the namespace's live instances)
and `runpod.io/max-instances` apply on top of the global `--max-hourly-spend` and
`--max-instances`. A value that does not parse, or lies outside the accepted range,
holds every create of the namespace back (with the reason on its pods, naming the
annotation and the range) rather than letting it spend without a cap. The ranges keep
every value a number the database and the arithmetic can hold; the digits are ASCII
only, without the signs, underscores and spaces Python's own parsers let through.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.core.money.hourly_cap import within_cap
from reconciler.core.printable import quoted

MAX_HOURLY_SPEND_ANNOTATION = "runpod.io/max-hourly-spend"
MAX_INSTANCES_ANNOTATION = "runpod.io/max-instances"
MOST_INSTANCES = 100_000
MOST_HOURLY_SPEND = 1_000_000
_WHOLE = re.compile(r"[0-9]{1,9}")
_AMOUNT = re.compile(r"[0-9]{1,9}(\.[0-9]{1,6})?")


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
        if _AMOUNT.fullmatch(spend) and float(spend) <= MOST_HOURLY_SPEND:
            max_spend = float(spend)
        else:
            errors.append(
                f"{MAX_HOURLY_SPEND_ANNOTATION}: {quoted(spend)} is not a USD amount "
                f"from 0 to {MOST_HOURLY_SPEND}"
            )
    if count is not None:
        if _WHOLE.fullmatch(count) and int(count) <= MOST_INSTANCES:
            max_count = int(count)
        else:
            errors.append(
                f"{MAX_INSTANCES_ANNOTATION}: {quoted(count)} is not a whole number "
                f"from 0 to {MOST_INSTANCES}"
            )
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

    def refusal(
        self, caps: NamespaceCaps | None, extra_cost: float, extra_instances: int = 1
    ) -> str | None:
        """Why `extra_instances` more (one pod's, or a cluster's members) costing
        `extra_cost` together would break the caps, else None."""
        if caps is None:
            return None
        if caps.error:
            return caps.error
        if caps.max_instances is not None and self.instances + extra_instances > caps.max_instances:
            return (
                f"namespace {caps.namespace}: {self.instances}/{caps.max_instances} "
                f"instances ({MAX_INSTANCES_ANNOTATION})"
            )
        if caps.max_hourly_spend is not None and not within_cap(
            self.hourly_spend + extra_cost, caps.max_hourly_spend
        ):
            return (
                f"namespace {caps.namespace}: ${self.hourly_spend:.2f}/h of "
                f"${caps.max_hourly_spend:.2f}/h spent, this "
                f"{'pod' if extra_instances == 1 else 'cluster'} needs at least "
                f"${extra_cost:.2f}/h ({MAX_HOURLY_SPEND_ANNOTATION})"
            )
        return None


@dataclass
class Spent:
    """What runs, or is being created, at list price: in all (for `--max-instances` and
    `--max-hourly-spend`) and per namespace (for its caps). Instances count one each;
    an Instant Cluster counts its N members and N times their price; a network volume
    counts its storage's price and no instance."""

    instances: int = 0
    hourly_spend: float = 0.0
    namespaces: dict[str, NamespaceUse] = field(default_factory=dict)

    def use(self, namespace: str) -> NamespaceUse:
        return self.namespaces.setdefault(namespace, NamespaceUse())

    def add(self, namespace: str | None, instances: int, hourly_spend: float) -> None:
        self.instances += instances
        self.hourly_spend += hourly_spend
        if namespace is not None:
            use = self.use(namespace)
            use.instances += instances
            use.hourly_spend += hourly_spend
