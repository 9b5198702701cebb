"""The node heartbeat: the virtual node registered and its Lease renewed, so it stays Ready.

One object for every run mode (docs/architecture.md §5). The loop beats on its own
schedule (`beat`), like the kubelet: each beat registers the node again (recreated if it
was deleted, its Ready condition rewritten when it changed or is due) and renews the
Lease. A process without a heartbeat schedule (`sync --once`, the sandbox) keeps the
node alive from its ticks (`keep_alive`): it registers the node on its first tick and
renews the Lease on every one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from reconciler.adapters.kube.client import KubeClient
from reconciler.core.config import Settings
from reconciler.core.domain import KubeObject
from reconciler.core.node.virtual_node import build_node, kubelet_version

log = logging.getLogger(__name__)

# The node lifecycle controller's grace period without a heartbeat before it marks the
# node Unknown (40 s before Kubernetes 1.32, 50 s since): late beyond it, we say so.
NODE_MONITOR_GRACE_SECONDS = 40


class NodeHeartbeat:
    def __init__(self, kube: KubeClient, settings: Settings, clock: Callable[[], datetime]) -> None:
        self.kube, self.settings, self.clock = kube, settings, clock
        self._registered = False
        self._kubelet_version: str | None = None

    def beat(self) -> None:
        """Register the node again and renew its Lease. Raises KubeError."""
        self._register()
        self._renew()

    def keep_alive(self) -> None:
        """Register the node once per process, renew its Lease every time. Raises KubeError."""
        if not self._registered:
            self._register()
        self._renew()

    def _register(self) -> None:
        self.kube.node.ensure(self._desired_node())
        self._registered = True

    def _desired_node(self) -> KubeObject:
        """The Node to register; its kubelet version follows the cluster's (read once)."""
        if self._kubelet_version is None:
            self._kubelet_version = kubelet_version(self.kube.cluster.server_version())
        return build_node(self.settings, self.clock(), self._kubelet_version)

    def _renew(self) -> None:
        """Renew the node's Lease, and say so when it had gone unrenewed for longer than
        the grace period: the node was NotReady meanwhile (a CronJob run too short, or a
        reconciler that was away)."""
        previous = self.kube.node.renew_lease(self.settings.node.name)
        late = 0.0 if previous is None else (self.clock() - previous).total_seconds()
        if late > NODE_MONITOR_GRACE_SECONDS:
            log.warning(
                "the node's Lease had not been renewed for %d s: the node was "
                "NotReady and its pods at risk of eviction; with --once, raise "
                "--stay to the schedule's period minus the run's start-up",
                late,
            )
