"""The CronJob mode's run: one tick, then the node's heartbeat until the next run is due.

A run that exits after its tick leaves the virtual node without a heartbeat until the
next one. Past the node monitor grace period (40 s, 50 s since Kubernetes 1.32) the node
lifecycle controller marks it Unknown and taints it `unreachable:NoExecute`; five minutes
later (DefaultTolerationSeconds) it evicts the node's pods, and on a managed cloud the
cloud node controller deletes the NotReady node at once, after which pod garbage
collection deletes its pods. Either way the reconciler then terminates instances that
were working. So a run stays: it renews the node's Lease (and re-registers a deleted
Node) every heartbeat interval until `stay` seconds after it began, the schedule's
period minus a margin for the next run to start. The node is never NotReady.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from reconciler.adapters.kube import errors as kube_errors
from reconciler.runtime.process.heartbeat import NODE_MONITOR_GRACE_SECONDS, NodeHeartbeat

log = logging.getLogger(__name__)

WITHOUT_STAY_WARNING = (
    "--once without --stay: the node's heartbeat stops when this run ends. Runs more than "
    f"{NODE_MONITOR_GRACE_SECONDS} s apart leave the node NotReady in between; after 5 "
    "minutes its pods are evicted, and a managed cloud's node controller may delete the "
    "node at once, which ends every instance. Run the Deployment, or pass --stay with the "
    "schedule period minus the start-up time and a margin (deploy/cronjob: --stay 40)."
)


def stay_beating(
    heartbeat: NodeHeartbeat,
    since: datetime,
    stay: float,
    interval: float,
    sleep: Callable[[float], None],
) -> int:
    """Beat every `interval` seconds until `stay` seconds after `since`; the number of
    failed beats (a failure is logged, and the next beat tries again)."""
    until = since + timedelta(seconds=stay)
    failed = 0
    while (remaining := (until - heartbeat.clock()).total_seconds()) > 0:
        sleep(min(interval, remaining))
        try:
            heartbeat.beat()
        except kube_errors.KubeError as exc:
            failed += 1
            log.warning("node heartbeat failed: %s", exc)
    return failed
