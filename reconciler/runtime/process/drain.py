"""`reconciler drain`: end every RunPod instance this reconciler owns, and wait until
RunPod no longer lists them. The step before uninstalling, so nothing is left billing.

It finds instances by their owner tag alone (no database needed), so it also works from
a laptop after the in-cluster database is gone. It refuses while a reconciler still
beats the virtual node's heartbeat: that reconciler would create the instances again.

Cost in RunPod requests: one list, one DELETE per owned instance, then one list per
poll until the list is empty (a DELETE that fails is tried again on the next poll).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.pods.ownership import owned_instances
from reconciler.runtime.process_log import Decision, decision

log = logging.getLogger(__name__)

# A reconciler renews the node Lease every 10 s (the loop) or during each run (--once);
# one renewed within the Lease's own duration (40 s) may still be acting.
HEARTBEAT_FRESH = timedelta(seconds=40)


class StillReconciling(RuntimeError):
    """A reconciler still runs for this node; draining now would race with it."""


@dataclass
class DrainReport:
    terminated: list[str] = field(default_factory=list)
    """Instances this drain sent a DELETE for (or that were gone when it tried)."""
    remaining: list[str] = field(default_factory=list)
    """Owned instances RunPod still listed when the timeout ran out."""
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.remaining


def check_no_reconciler(kube: KubeClient, node_name: str, now: datetime) -> None:
    """Refuse when the node's heartbeat is fresh: a reconciler still serves the node."""
    renewed = kube.node.lease_renewed_at(node_name)
    if renewed is not None and now - renewed < HEARTBEAT_FRESH:
        age = max(0, int((now - renewed).total_seconds()))
        raise StillReconciling(
            f"a reconciler still serves node {node_name} (its heartbeat Lease was renewed "
            f"{age} s ago): stop it first (scale the Deployment to 0, or suspend the "
            "CronJob), or pass --force"
        )


def drain(
    runpod: RunPodClient,
    owner_id: str,
    *,
    timeout: float,
    poll: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> DrainReport:
    """Terminate every instance tagged with `owner_id`; wait up to `timeout` seconds for
    RunPod's list to show none of them."""
    report = DrainReport()
    deadline = monotonic() + timeout
    while True:
        owned = [
            i
            for group in owned_instances(runpod.instances.list(), owner_id).values()
            for i in group
        ]
        for instance in owned:
            if instance.id in report.terminated:
                continue  # asked already; the list may lag behind the DELETE
            try:
                runpod.instances.delete(instance.id)
            except runpod_errors.RunPodError as exc:
                report.errors.append(f"{instance.id}: {exc}")
                log.warning("could not terminate %s (trying again): %s", instance.id, exc)
                continue
            report.terminated.append(instance.id)
            decision(
                Decision(
                    "terminate",
                    None,
                    None,
                    instance.id,
                    f"drain before uninstalling ({instance.name})",
                    instance.cost_per_hr,
                )
            )
        if not owned or monotonic() >= deadline:
            report.remaining = [i.id for i in owned]
            return report
        sleep(poll)
